// GranaryCluster runs several real granaryd processes as one cluster for
// integration tests: each with its own data directory, Unix socket and TCP
// port (on loopback, or on a node's own host and under its command prefix,
// e.g. in a network namespace), in the cache groups asked for, with
// membership from a members file (written before the first node starts) or
// from a real etcd. Nodes can be killed, restarted and added; a node added to
// a static cluster is written into the members file, which running nodes
// reload.
//
// Thread-safety: not thread-safe; one object per test.
#ifndef GRANARY_TESTS_SUPPORT_GRANARY_CLUSTER_H_
#define GRANARY_TESTS_SUPPORT_GRANARY_CLUSTER_H_

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cluster/cluster_map.h"
#include "common/dataset/manifest.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {

struct ClusterNode {
  std::string id;
  std::string group = kDefaultGroup;
  // Where peers reach the node, and what its command line starts with (see
  // GranarydOptions).
  std::string host = "127.0.0.1";
  std::vector<std::string> command_prefix = {};
};

class GranaryCluster {
 public:
  struct Options {
    std::vector<ClusterNode> nodes;
    // "http://HOST:PORT" of etcd; empty: a members file.
    std::string etcd_endpoint;
    // Flags every node gets (after the cluster's own, which they may override).
    std::vector<std::string> extra_args;
  };

  static absl::StatusOr<std::unique_ptr<GranaryCluster>> Start(Options options);
  // Start(), then WaitUntilFormed(): what most tests begin with.
  static absl::StatusOr<std::unique_ptr<GranaryCluster>> StartFormed(Options options);

  size_t size() const { return nodes_.size(); }
  GranarydProcess& node(size_t i) { return *nodes_[i].process; }
  const ClusterNode& spec(size_t i) const { return nodes_[i].spec; }
  const std::string& members_file() const { return members_file_; }
  // The cluster token file every node shares (0600), fresh for the cluster.
  const std::string& cluster_token_file() const { return token_file_; }

  // The members as every node is configured to see them (all up).
  std::vector<Member> Members() const;

  // Starts one more node (written into the members file first, for a static
  // cluster); returns its index.
  absl::StatusOr<size_t> AddNode(ClusterNode spec);

  // Waits until node `i` reports exactly the members `ids` as up.
  absl::Status WaitForMembers(size_t i, std::vector<std::string> ids,
                              std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // Waits until the cluster is formed: every node lists every member as up
  // (WaitForMembers) and reaches each of them (WaitForPeersReachable).
  absl::Status WaitUntilFormed(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // Registers `source` as dataset `name` through node `via`, and waits until
  // every node lists that version (each serves only versions its catalog
  // holds). `replicas` 0: the servers' default.
  absl::StatusOr<v1::DatasetInfo> RegisterDataset(size_t via, const std::string& name,
                                                  const std::string& source, uint32_t chunk_size,
                                                  uint32_t replicas = 0);

  // Waits until every node's Status reaches every member (`timeout` per
  // node). A node that tried a peer before the peer listened keeps failing
  // calls to it for gRPC's reconnection backoff; Status tries such a peer
  // again at once.
  absl::Status WaitForPeersReachable(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // Node `i`'s record of dataset `name` once it lists it (at `version`,
  // unless 0): a registration or refresh waits for each peer a bounded time,
  // so a loaded peer may get it after the call returns.
  absl::StatusOr<v1::DatasetInfo> WaitForDataset(
      size_t i, const std::string& name, uint64_t version = 0,
      std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // Waits until node `i`'s Locate of `dataset`, read from what the members
  // published, gives the same nodes the same cached bytes as a fresh one.
  absl::Status WaitForPublishedLocality(
      size_t i, const std::string& dataset,
      std::chrono::milliseconds timeout = std::chrono::seconds(30));

 private:
  struct Node {
    ClusterNode spec;
    int tcp_port = 0;
    std::unique_ptr<GranarydProcess> process;
  };
  explicit GranaryCluster(Options options) : options_(std::move(options)) {}
  absl::Status WriteMembersFile() const;
  absl::Status StartNode(Node* node);

  Options options_;
  TempDir temp_;
  std::string members_file_;
  std::string token_file_;
  std::vector<Node> nodes_;
};

// How many chunks of `manifest` each member of `group` owns by `map`'s ring:
// what a test expects each node's source reads to be.
std::map<std::string, int> ChunksPerOwner(const Manifest& manifest, const ClusterMap& map,
                                          std::string_view group);

}  // namespace granary::testing

#endif  // GRANARY_TESTS_SUPPORT_GRANARY_CLUSTER_H_
