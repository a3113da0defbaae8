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
//     answer), with every live peer, so a dataset registered on one server can
//     be read on all as soon as the registration returns;
//   - when a member appears, with that member;
//   - every `period`, with one random peer, to repair what a failed push
//     missed.
// A peer that cannot be reached is logged and caught up by a later exchange.
//
// A peer's records are checked before they are adopted (ValidatePeerRecord,
// then the source roots and limits of DatasetRegistry::Adopt): a peer is
// trusted to be a member of the cluster, not to be right.
//
// Thread-safety: all methods may be called concurrently; the destructor stops
// the background thread.
#ifndef GRANARY_CACHE_SERVER_CATALOG_CATALOG_SYNC_H_
#define GRANARY_CACHE_SERVER_CATALOG_CATALOG_SYNC_H_

#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "cache_server/catalog/catalog.h"
#include "cache_server/catalog/dataset_registry.h"
#include "cache_server/cluster/cluster_view.h"
#include "common/mutex.h"
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

  // Exchanges with every live peer, then starts the background thread.
  void Start();

  // Exchanges with every live peer now, in parallel; returns when all have
  // answered or failed.
  void PushToAll();

  // The callee's side of ExchangeCatalog: adopts the sender's newer records
  // (fetching their manifests from the sender) and returns this node's.
  absl::StatusOr<v1::ExchangeCatalogResponse> Answer(const v1::ExchangeCatalogRequest& request);

 private:
  absl::Status ExchangeWith(const Member& peer);
  void ExchangeWithAll(const std::vector<Member>& peers);
  // Adopts the records of `from` that are valid and newer than this node's;
  // each refused record is logged as an audit line. Fails only when `from`
  // cannot be read from at all.
  absl::Status Merge(const Member& from, const std::vector<v1::CatalogDataset>& records);
  // Fetches the manifests `record` names that this node lacks from `from`
  // and adopts the record.
  absl::Status AdoptFrom(const Member& from, const DatasetClient& reader,
                         const v1::CatalogDataset& record);
  void MembersChanged();
  void Run();

  Catalog* const catalog_;
  DatasetRegistry* const registry_;
  ClusterView* const cluster_;
  const std::chrono::milliseconds period_;

  Mutex mutex_;
  CondVar wake_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::set<std::string> known_peers_ ABSL_GUARDED_BY(mutex_);
  std::vector<Member> pending_ ABSL_GUARDED_BY(mutex_);  // New members to exchange with.
  std::thread thread_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_CATALOG_CATALOG_SYNC_H_
