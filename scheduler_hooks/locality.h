// Locality scoring: how well placed a node is for a job that reads some
// datasets, from the cluster's Locate answers (granary.v1.LocateResponse, one
// per dataset).
//
// For a node n in cache group g, over the job's datasets d with total bytes B_d
// and R_d replicas:
//   group share G(n) = sum_d B_d * g_d / sum_d B_d, where g_d, the share of d
//                      its group holds, is (bytes of d cached in g) / (R_d * B_d)
//   node share  N(n) = sum_d B_d * n_d / sum_d B_d, where n_d is
//                      (bytes of d cached on n) / B_d
// g_d and n_d come from common/scheduling/locality_share.h, as granaryd's own Locate
// fractions do, so a Slurm hook reading those fractions and this index agree.
//   locality    L(n) = 0.8 * G(n) + 0.2 * N(n)
//   score       S(n) = floor(10 * L(n)), an integer 0..10 (kMaxScore, the
//                      Kubernetes extender's MaxExtenderPriority).
// The group share dominates because a job reads its whole dataset from every
// node of its group over the switch; the node's own share (what it reads over
// its Unix socket) breaks ties inside a group. A single-node group holding the
// whole dataset scores 10; a node the cluster does not know scores 0.
//
// Datasets the cluster does not know are left out by the caller; when no
// dataset with bytes is known the index is neutral() and every node scores 0,
// so the scheduler's other criteria decide alone.
//
// Thread-safety: build with Add() from one thread; the const methods may then
// be called concurrently.
#ifndef GRANARY_SCHEDULER_HOOKS_LOCALITY_H_
#define GRANARY_SCHEDULER_HOOKS_LOCALITY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "proto/granary.pb.h"
#include "scheduler_hooks/locator.h"

namespace granary::hooks {

inline constexpr int kMaxScore = 10;
inline constexpr double kGroupWeight = 0.8;
inline constexpr double kNodeWeight = 0.2;

struct NodeLocality {
  std::string group;       // Empty for a node the cluster does not know.
  double group_share = 0;  // G(n), 0..1.
  double node_share = 0;   // N(n), 0..1.
  int score = 0;           // S(n), 0..kMaxScore.
};

class LocalityIndex {
 public:
  // Adds one dataset's locality. A dataset of zero bytes adds nothing.
  void Add(const v1::LocateResponse& locate);

  // True when no dataset with bytes was added: nothing to prefer.
  bool neutral() const { return total_bytes_ == 0; }

  // The locality of node `node_id` (a Granary node id, which deployments set to
  // the scheduler's node name).
  NodeLocality Of(std::string_view node_id) const;

  // Every cache group with its share G, and every node with its own share N
  // (the node part of N(n) above), largest first, ties by name; those holding
  // nothing are left out. Empty when neutral().
  struct Share {
    std::string name;
    double share = 0;
  };
  std::vector<Share> GroupShares() const;
  std::vector<Share> NodeShares() const;

 private:
  // Shares weighted by their datasets' bytes (B_d * n_d, B_d * g_d), summed.
  struct NodeBytes {
    std::string group;
    double weighted_share = 0;
  };
  // A share of all the datasets' bytes from its weighted sum, at most 1.
  double ShareOf(double weighted_share) const;

  uint64_t total_bytes_ = 0;
  absl::flat_hash_map<std::string, NodeBytes> nodes_;
  absl::flat_hash_map<std::string, double> groups_;
};

// The index of `datasets`, each asked of `locator`: a dataset the cluster
// does not know is left out (and logged); any other error is returned, naming
// the dataset, since a partial index would rank nodes wrongly.
absl::StatusOr<LocalityIndex> LocateDatasets(const Locator& locator,
                                             const std::vector<std::string>& datasets);

// S for a locality L in 0..1: floor(10 * L), clamped to 0..kMaxScore.
int ScoreOf(double locality);

}  // namespace granary::hooks

#endif  // GRANARY_SCHEDULER_HOOKS_LOCALITY_H_
