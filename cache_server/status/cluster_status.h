// ClusterStatus answers Status and Locate: this node's figures (store usage,
// hit and miss counts, fills in progress, datasets that would not load) and,
// unless only this node is asked for, every peer's. Status gathers them from
// every peer in parallel, and so does Locate when asked for a fresh answer;
// otherwise Locate reads the reports peers published (LocalityBoard), calls
// no one, and gives each node's figures with their age.
//
// A peer that refuses the connection, or does not answer within
// kPeerAnswerWait (connecting included), is reported "unreachable" by Status
// and left out of Locate, so one dead peer never holds up the answer (one
// that refuses connections costs one refused connection, not the wait;
// ConnectToPeerUnlessRefused); members known to be down are reported "down". Locate ignores peers
// that hold another version of the dataset (a refresh not yet replicated), sums each group's cached
// bytes, and gives every node and group its share of the dataset with LocalityShare, the formula
// the scheduler hooks read.
//
// Thread-safety: all methods may be called concurrently.
#ifndef GRANARY_CACHE_SERVER_STATUS_CLUSTER_STATUS_H_
#define GRANARY_CACHE_SERVER_STATUS_CLUSTER_STATUS_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cache_server/catalog/catalog.h"
#include "cache_server/catalog/dataset_registry.h"
#include "cache_server/cluster/cluster_view.h"
#include "cache_server/metrics.h"
#include "cache_server/prewarm/fill_scheduler.h"
#include "cache_server/status/locality_board.h"
#include "cache_server/store/chunk_store.h"
#include "proto/granary.grpc.pb.h"

namespace granary {

class ClusterStatus {
 public:
  static constexpr std::chrono::seconds kPeerAnswerWait{3};
  static constexpr size_t kMaxParallelPeerCalls = 32;

  // What the figures come from; owned by the server.
  struct Parts {
    const Catalog* catalog;
    DatasetRegistry* registry;
    store::ChunkStore* store;
    const ServerMetrics* metrics;
    ClusterView* cluster;
    FillScheduler* fills;
    const LocalityBoard* locality;
  };

  // Uptime counts from construction.
  explicit ClusterStatus(Parts parts);

  v1::StatusResponse Status(bool local_only) const;
  // NOT_FOUND for an unknown dataset.
  absl::StatusOr<v1::LocateResponse> Locate(const std::string& name, bool local_only,
                                            bool fresh) const;

 private:
  v1::NodeStatus LocalStatus() const;
  absl::StatusOr<v1::LocateResponse> LocateLocally(const std::string& name) const;
  // Adds the peers' nodes to `response` (this node's answer), asking each.
  void AddPeersAsked(v1::LocateResponse& response) const;
  // Adds the nodes of the peers' published reports to `response`.
  void AddPeersPublished(v1::LocateResponse& response) const;
  // Calls every peer in parallel; `ask` makes the call with the given stub
  // and context and keeps what it needs from peer `i`.
  void AskPeers(const std::vector<Member>& peers,
                const std::function<grpc::Status(v1::Granary::Stub&, grpc::ClientContext*,
                                                 size_t i)>& ask) const;

  const Parts parts_;
  const std::chrono::steady_clock::time_point started_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_STATUS_CLUSTER_STATUS_H_
