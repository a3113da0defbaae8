// LocalityBoard publishes what this node holds of each dataset and gathers
// what the other members publish, so that Locate answers for the whole
// cluster without calling every member (ClusterStatus).
//
// Gossip: every `period` the board makes this node's report (the cached bytes
// and fill of each dataset version it holds bytes of, and a heartbeat) and
// exchanges with one random live peer (ExchangeLocality): it sends that report
// and a digest of the reports it holds, and adopts the newer ones the peer
// answers with. A report reaches every node within O(log N) periods. Holdings
// travel only when they changed (a new `published_unix_ms`); otherwise a
// report travels as its heartbeat alone, which keeps it from growing old. What
// one round costs: a digest of about 30 bytes a member, a heartbeat of about
// 30 bytes a member, holdings of about 40 bytes per dataset a node holds
// bytes of when they changed; an answer is at most kMaxAnswerBytes (what does
// not fit goes in later rounds, since the caller's digest still lacks it).
//
// A report is trusted to come from a member, not to be right: it is adopted
// only for a listed member other than this node, when well formed
// (ValidateLocalityReport) and published later than the one held. Reports of
// members no longer listed are dropped. A report older than `max_age` is not
// returned: its node stopped publishing (dead, or cut off) and what it said
// may no longer hold.
//
// A report's age is that of its heartbeat, and never compares two nodes'
// clocks: a report carries its age when sent, and the board adds the time it
// has held it. Published times and heartbeats are compared only between
// reports of one node.
//
// Thread-safety: all methods may be called concurrently; the destructor stops
// the gossip thread and cancels its call in flight.
#ifndef GRANARY_CACHE_SERVER_STATUS_LOCALITY_BOARD_H_
#define GRANARY_CACHE_SERVER_STATUS_LOCALITY_BOARD_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "cache_server/catalog/dataset_registry.h"
#include "cache_server/cluster/cluster_view.h"
#include "cache_server/prewarm/fill_scheduler.h"
#include "common/base/mutex.h"
#include "grpcpp/client_context.h"
#include "proto/granary.pb.h"

namespace granary {

// OK when a peer's report is well formed: a published time after the epoch,
// a heartbeat no earlier, neither more than kMaxPeerClockAhead ahead of
// `now_unix_ms`; an age that is not negative; no holdings in a heartbeat,
// at most `max_holdings` otherwise, each of a valid dataset name and a
// version. INVALID_ARGUMENT naming the node and the fault otherwise.
absl::Status ValidateLocalityReport(const v1::LocalityReport& report, int64_t now_unix_ms,
                                    size_t max_holdings);

class LocalityBoard {
 public:
  struct Options {
    std::chrono::milliseconds period{1000};
    std::chrono::milliseconds max_age{30'000};
    size_t max_holdings = 1000;  // Per report: the catalog's dataset limit.
  };

  static constexpr size_t kMaxAnswerBytes = 2 << 20;
  // A round with a peer that does not answer in this time is given up; the
  // next round asks another.
  static constexpr std::chrono::seconds kExchangeWait{2};

  LocalityBoard(DatasetRegistry* registry, FillScheduler* fills, ClusterView* cluster,
                Options options);
  ~LocalityBoard();
  LocalityBoard(const LocalityBoard&) = delete;
  LocalityBoard& operator=(const LocalityBoard&) = delete;

  // Starts the gossip.
  void Start();

  // This node's report as of now (age 0), with a new heartbeat.
  v1::LocalityReport OwnReport() ABSL_LOCKS_EXCLUDED(mutex_);

  // What one listed peer published of one dataset.
  struct PeerHolding {
    std::string node_id;
    std::string group;
    int64_t age_ms = 0;                         // Of the peer's report, now.
    std::optional<v1::DatasetHolding> holding;  // Unset: no bytes of it.
  };
  // One entry per listed peer whose report is at most max_age old.
  std::vector<PeerHolding> HoldingsOf(std::string_view dataset) const;

  // The callee's side of ExchangeLocality: adopts the sender's report and
  // returns the reports newer than the sender's digest. INVALID_ARGUMENT
  // when the sender is not a listed member or its report is malformed.
  absl::StatusOr<v1::ExchangeLocalityResponse> Answer(const v1::ExchangeLocalityRequest& request);

 private:
  struct Held {
    v1::LocalityReport report;                       // age_ms as received.
    std::chrono::steady_clock::time_point received;  // Of the heartbeat.
  };

  // Adopts `report` (received from member `from`) when valid and of a listed
  // member other than this node: its holdings when newer than those held, its
  // heartbeat when newer and of the holdings held. Logs a refusal as an
  // audit line and returns it.
  absl::Status Adopt(const v1::LocalityReport& report, const std::string& from)
      ABSL_LOCKS_EXCLUDED(mutex_);
  // The age of `held` now.
  static int64_t AgeMs(const Held& held, std::chrono::steady_clock::time_point now);
  absl::Status ExchangeWith(const Member& peer) ABSL_LOCKS_EXCLUDED(mutex_);
  void Run();

  DatasetRegistry* const registry_;
  FillScheduler* const fills_;
  ClusterView* const cluster_;
  const Options options_;

  mutable Mutex mutex_;
  CondVar wake_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  grpc::ClientContext* call_ ABSL_GUARDED_BY(mutex_) = nullptr;  // In flight.
  // This node's last report: what it held, and when that changed.
  std::string own_holdings_ ABSL_GUARDED_BY(mutex_);
  int64_t own_published_unix_ms_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t own_heartbeat_unix_ms_ ABSL_GUARDED_BY(mutex_) = 0;
  absl::flat_hash_map<std::string, Held> reports_ ABSL_GUARDED_BY(mutex_);
  std::thread thread_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_STATUS_LOCALITY_BOARD_H_
