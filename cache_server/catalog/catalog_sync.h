// CatalogSync replicates the catalog (datasets and their manifests) to every
// server of the cluster, so that it survives the loss of any node and a
// joining node receives it.
//
// Anti-entropy between two servers is one ExchangeCatalog call: the caller
// sends all its records (tombstones included), the callee adopts the newer
// ones and answers with its own, which the caller adopts in turn. A record is
// adopted only if it changed later than the local one (Catalog::Adopt);
// manifests it names are fetched with GetManifest from the side that has them.
// Records are small, manifests are fetched only when new.
//
// When exchanges happen:
//   - at Start(), with every live peer (a joining node gets the catalog);
//   - after a local change (PushToAll(), called by the dataset RPCs before they
//     answer), with every live peer;
//   - when a member appears, with that member;
//   - every `period`, with one random peer, to repair what was missed.
// Exchanges run on a pool of pusher threads and never hold a caller past a
// bounded wait: PushToAll() returns once every peer has the change (or failed
// its last exchange) or after kPushWait, whichever is first, so a registration
// in a healthy cluster is readable on every node when it returns, and a silent
// peer (stopped, or behind a dead link with an open connection) delays it by
// kPushWait at most. A peer owes at most one exchange at a time: changes made
// while one is in flight are carried by one more exchange after it, and a peer
// that fails is retried with a doubling backoff (kFirstRetryBackoff to
// kMaxRetryBackoff) until it answers or leaves the cluster, so a peer that was
// stopped gets the change as soon as it wakes (the call in flight completes) or
// at its next retry. A peer that starts an exchange of its own is alive: its
// backoff ends and what it owes is sent at once (a node that joins is listed
// before it listens, so its peers' first pushes to it fail).
//
// A peer's records are checked before they are adopted (ValidatePeerRecord,
// then the source roots and limits of DatasetRegistry::Adopt): a peer is
// trusted to be a member of the cluster, not to be right.
//
// Thread-safety: all methods may be called concurrently; the destructor
// cancels the exchanges in flight and stops the background threads.
#ifndef GRANARY_CACHE_SERVER_CATALOG_CATALOG_SYNC_H_
#define GRANARY_CACHE_SERVER_CATALOG_CATALOG_SYNC_H_

#include <chrono>
#include <deque>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "cache_server/catalog/catalog.h"
#include "cache_server/catalog/dataset_registry.h"
#include "cache_server/cluster/cluster_view.h"
#include "common/base/mutex.h"
#include "grpcpp/client_context.h"
#include "proto/granary.pb.h"

namespace granary {

// OK when a peer's record is well formed: a valid name, dated after the
// epoch and at most a few minutes ahead of `now_unix_ms`, and (unless a
// tombstone) with a version, a chunk size and replicas in range.
// INVALID_ARGUMENT naming the dataset and the fault otherwise.
absl::Status ValidatePeerRecord(const v1::CatalogDataset& record, int64_t now_unix_ms);

class CatalogSync {
 public:
  CatalogSync(Catalog* catalog, DatasetRegistry* registry, ClusterView* cluster,
              std::chrono::milliseconds period);
  ~CatalogSync();
  CatalogSync(const CatalogSync&) = delete;
  CatalogSync& operator=(const CatalogSync&) = delete;

  static constexpr size_t kMaxParallelExchanges = 16;  // The pusher threads.
  static constexpr std::chrono::milliseconds kPushWait{500};
  static constexpr std::chrono::milliseconds kStartWait{1000};
  static constexpr std::chrono::seconds kFirstRetryBackoff{1};
  static constexpr std::chrono::seconds kMaxRetryBackoff{60};

  // Starts the pushers and the periodic exchange, and an exchange with every
  // live peer; returns once one of them succeeded (this node then holds the
  // cluster's catalog), all failed, or kStartWait passed.
  void Start();

  // Owes every live peer an exchange carrying the catalog as it is now;
  // returns once all have completed it or after kPushWait.
  void PushToAll();

  // The callee's side of ExchangeCatalog: adopts the sender's newer records
  // (fetching their manifests from the sender) and returns this node's.
  absl::StatusOr<v1::ExchangeCatalogResponse> Answer(const v1::ExchangeCatalogRequest& request);

 private:
  // One peer's place in the push queue. `owed` and `delivered` are change
  // generations: the peer needs an exchange while owed > delivered.
  struct PeerPush {
    Member member;
    uint64_t owed = 0;
    uint64_t delivered = 0;
    bool queued = false;  // In ready_ or retries_.
    bool in_flight = false;
    std::chrono::milliseconds backoff{0};
  };

  // Owes `peers` an exchange carrying the catalog as it is now and waits up
  // to `wait` for every one to be settled (SettledLocked) or, with
  // `until_one_succeeds`, for any exchange to succeed.
  void OweAndWait(const std::vector<Member>& peers, std::chrono::milliseconds wait,
                  bool until_one_succeeds) ABSL_LOCKS_EXCLUDED(mutex_);
  // ExchangeWith on a context the destructor can cancel, so that a silent
  // peer never holds it; CANCELLED once stopping.
  absl::Status CancellableExchange(const Member& peer) ABSL_LOCKS_EXCLUDED(mutex_);
  absl::Status ExchangeWith(const Member& peer, grpc::ClientContext* context);
  // Marks `peers` as owed generation_ and queues those not queued or in
  // flight.
  void OweLocked(const std::vector<Member>& peers) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Whether every peer in `ids` has had `generation` delivered, left the
  // cluster, or failed its last exchange (it is being retried; nobody waits
  // on a peer known to be unreachable).
  bool SettledLocked(const std::vector<std::string>& ids, uint64_t generation) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void RunPusher();
  // Records the end of an exchange with `member` that carried generation
  // `carried`: delivered (requeued if it owes a later one) or retried after
  // its backoff.
  void FinishedLocked(const Member& member, uint64_t carried, const absl::Status& exchanged)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Adopts the records of `from` that are valid and newer than this node's;
  // each refused record is logged as an audit line. Fails only when `from`
  // cannot be read from at all.
  absl::Status Merge(const Member& from, const std::vector<v1::CatalogDataset>& records);
  // Fetches the manifests `record` names that this node lacks from `from`
  // and adopts the record.
  absl::Status AdoptFrom(const Member& from, const DatasetClient& reader,
                         const v1::CatalogDataset& record);
  // Ends the backoff of `member`, which has just called this node, and
  // queues it now if it owes an exchange.
  void HeardFrom(const Member& member) ABSL_LOCKS_EXCLUDED(mutex_);
  void MembersChanged();
  void Run();

  Catalog* const catalog_;
  DatasetRegistry* const registry_;
  ClusterView* const cluster_;
  const std::chrono::milliseconds period_;

  Mutex mutex_;
  CondVar wake_;
  CondVar work_;       // A peer became ready, or stopping_.
  CondVar delivered_;  // An exchange finished.
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  uint64_t generation_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t exchanges_succeeded_ ABSL_GUARDED_BY(mutex_) = 0;
  absl::flat_hash_map<std::string, PeerPush> peers_ ABSL_GUARDED_BY(mutex_);
  std::deque<std::string> ready_ ABSL_GUARDED_BY(mutex_);
  std::multimap<std::chrono::steady_clock::time_point, std::string> retries_
      ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_set<grpc::ClientContext*> calls_ ABSL_GUARDED_BY(mutex_);
  std::vector<std::thread> pushers_;
  std::thread thread_;  // The periodic exchange.
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_CATALOG_CATALOG_SYNC_H_
