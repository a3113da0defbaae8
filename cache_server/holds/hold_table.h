// HoldTable is this node's table of holds: the dataset versions it keeps in
// its cache for batch jobs that named them and wait or run (placed by their
// stage-ins, cache_server/staging/, on every member of the groups the jobs
// target). A held version is held in the store for as long as it is held
// (VersionActivity::Hold), so neither eviction mode (dataset-aware or LRU)
// reclaims its chunks for another dataset's; pinned versions and the rule
// that an active chunk never displaces another stay as they were.
//
// Holds are leases: a holder's holds lapse `lease` after it last placed
// them, so a job whose stage-in is gone (its granaryd restarted, or the
// scheduler forgot the job) holds nothing for long; Release() drops them at
// once (the job's teardown).
//
// The share: what a version takes on this node is its share in this node's
// group when complete (its bytes × min(replicas, members) / members). The
// versions held, each counted once whoever holds it, take at most
// `share_bytes` (hold_share of the capacity); a placement past it is refused
// with RESOURCE_EXHAUSTED naming the holds that fill the share, and nothing
// of it is held (the job reads through). The cache never exceeds its
// capacity for a hold: a hold only keeps what is there.
//
// Thread-safety: all methods may be called concurrently; a thread of its
// own, stopped by the destructor, lets lapsed holds go.
#ifndef GRANARY_CACHE_SERVER_HOLDS_HOLD_TABLE_H_
#define GRANARY_CACHE_SERVER_HOLDS_HOLD_TABLE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cache_server/catalog/dataset_registry.h"
#include "cache_server/catalog/version_activity.h"
#include "cache_server/cluster/cluster_view.h"
#include "cache_server/metrics.h"
#include "common/base/mutex.h"
#include "common/base/periodic_thread.h"
#include "proto/staging.pb.h"

namespace granary {

class HoldTable {
 public:
  static constexpr size_t kMaxHolders = 10'000;
  static constexpr size_t kMaxHolderLength = 128;
  static constexpr size_t kMaxDatasets = 64;
  static constexpr std::chrono::seconds kMinLease{1};
  static constexpr std::chrono::hours kMaxLease{24};
  static constexpr std::chrono::seconds kSweepPeriod{1};

  struct Options {
    uint64_t share_bytes = 0;
    std::string share_text;  // "hold_share 0.5 of 64 MiB", for messages.
  };

  // The parts must outlive the table.
  HoldTable(DatasetRegistry* registry, VersionActivity* activity, ClusterView* cluster,
            Options options);
  ~HoldTable();
  HoldTable(const HoldTable&) = delete;
  HoldTable& operator=(const HoldTable&) = delete;

  // Holds the current versions of `datasets` for `holder` until `lease`
  // from now, in place of what it held. INVALID_ARGUMENT for a bad holder,
  // dataset count or lease; NOT_FOUND naming an unknown dataset;
  // RESOURCE_EXHAUSTED past the share (above), or past kMaxHolders.
  absl::Status Place(const std::string& holder, const std::vector<std::string>& datasets,
                     std::chrono::milliseconds lease);
  // Drops what `holder` holds; how many versions it held.
  size_t Release(const std::string& holder);
  // This node's holds, by holder and dataset.
  v1::NodeHolds List() const;
  // What they take, without listing them (for every metrics scrape).
  HoldTotals Totals() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Held {
    std::string dataset;
    uint64_t version = 0;
    uint64_t bytes = 0;
  };
  struct Holding {
    std::vector<Held> versions;
    Clock::time_point expires;
  };

  // What the current version of `dataset` takes here when complete.
  absl::StatusOr<Held> Resolve(const std::string& dataset) const;
  // The versions held by holders other than `except`, with their bytes.
  std::map<uint64_t, uint64_t> HeldByOthersLocked(const std::string& except) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  HoldTotals TotalsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseVersions(const std::vector<Held>& versions);
  void ExpireLapsed();

  DatasetRegistry* const registry_;
  VersionActivity* const activity_;
  ClusterView* const cluster_;
  const Options options_;

  mutable Mutex mu_;
  std::map<std::string, Holding> holders_ ABSL_GUARDED_BY(mu_);
  // Last: it stops before the rest goes.
  std::unique_ptr<PeriodicThread> sweeper_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_HOLDS_HOLD_TABLE_H_
