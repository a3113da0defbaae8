// GranaryService is the gRPC face of one granaryd node (package granary.v1):
// datasets, manifests, chunk reads, prewarm, status and locate. It validates
// requests and maps every error to a gRPC status with the matching code and a
// message naming what was wrong; a bad request never affects other callers.
//
// In a cluster, Status gathers every member's figures and Locate reads what
// members published, or asks each when asked for a fresh answer (unless the
// request asks for this node only; ClusterStatus, LocalityBoard), Prewarm coordinates the
// whole cache group (PrewarmCoordinator), dataset changes are pushed to every
// peer, the call answering once they have them or after a bounded wait
// (CatalogSync), and GetMembers tells readers
// whom to route to.
//
// Every call first learns who its caller is (RequestAuthenticator) and
// whether it may make the call (AccessPolicy); a read by a local caller other
// than root is also checked against the file's owner, group and mode, both
// as the version read recorded them and as the dataset's current version
// does, so that a permission the source took away holds for older versions
// too; and older versions are listed (GetDataset, ListDatasets, GetManifest
// of an older version) to administrators and cluster members only. Every
// change (register, refresh, remove, prewarm) leaves an audit line in the
// log, allowed or refused: who, what, and the result.
//
// Streams: ReadChunk sends at most kMaxReadMessageBytes per message;
// GetManifest sends pages of at most Catalog::kManifestPageEntries entries;
// Prewarm sends progress every PrewarmCoordinator::kProgressInterval and a
// final message with finished=true, and stops its workers when the client
// goes away.
//
// Thread-safety: gRPC calls handlers concurrently; all state is thread-safe.
#ifndef GRANARY_CACHE_SERVER_SERVICE_H_
#define GRANARY_CACHE_SERVER_SERVICE_H_

#include <cstddef>
#include <string_view>

#include "cache_server/access/access_policy.h"
#include "cache_server/access/caller.h"
#include "cache_server/access/request_authenticator.h"
#include "cache_server/catalog/catalog.h"
#include "cache_server/catalog/catalog_sync.h"
#include "cache_server/catalog/dataset_registry.h"
#include "cache_server/cluster/cluster_view.h"
#include "cache_server/metrics.h"
#include "cache_server/prewarm/prewarm_coordinator.h"
#include "cache_server/read_path/read_through.h"
#include "cache_server/status/cluster_status.h"
#include "cache_server/status/locality_board.h"
#include "proto/granary.grpc.pb.h"

namespace granary {

// What the service works with; owned by the server.
struct ServiceParts {
  Catalog* catalog;
  DatasetRegistry* registry;
  ReadThrough* read_through;
  ServerMetrics* metrics;
  ClusterView* cluster;
  CatalogSync* catalog_sync;
  RequestAuthenticator* authenticator;
  const AccessPolicy* policy;
  PrewarmCoordinator* prewarms;
  const ClusterStatus* status;
  LocalityBoard* locality;
};

class GranaryService final : public v1::Granary::Service {
 public:
  static constexpr size_t kMaxReadMessageBytes = 1 << 20;

  explicit GranaryService(ServiceParts parts);

  grpc::Status AddDataset(grpc::ServerContext* context, const v1::AddDatasetRequest* request,
                          v1::DatasetInfo* response) override;
  grpc::Status ListDatasets(grpc::ServerContext* context, const v1::ListDatasetsRequest* request,
                            v1::ListDatasetsResponse* response) override;
  grpc::Status GetDataset(grpc::ServerContext* context, const v1::GetDatasetRequest* request,
                          v1::DatasetInfo* response) override;
  grpc::Status RefreshDataset(grpc::ServerContext* context,
                              const v1::RefreshDatasetRequest* request,
                              v1::DatasetInfo* response) override;
  grpc::Status RemoveDataset(grpc::ServerContext* context, const v1::RemoveDatasetRequest* request,
                             v1::RemoveDatasetResponse* response) override;
  grpc::Status GetManifest(grpc::ServerContext* context, const v1::GetManifestRequest* request,
                           grpc::ServerWriter<v1::ManifestPage>* writer) override;
  grpc::Status ReadChunk(grpc::ServerContext* context, const v1::ReadChunkRequest* request,
                         grpc::ServerWriter<v1::ReadChunkResponse>* writer) override;
  grpc::Status Prewarm(grpc::ServerContext* context, const v1::PrewarmRequest* request,
                       grpc::ServerWriter<v1::PrewarmProgress>* writer) override;
  grpc::Status Status(grpc::ServerContext* context, const v1::StatusRequest* request,
                      v1::StatusResponse* response) override;
  grpc::Status Locate(grpc::ServerContext* context, const v1::LocateRequest* request,
                      v1::LocateResponse* response) override;
  grpc::Status GetMembers(grpc::ServerContext* context, const v1::GetMembersRequest* request,
                          v1::GetMembersResponse* response) override;
  grpc::Status ExchangeCatalog(grpc::ServerContext* context,
                               const v1::ExchangeCatalogRequest* request,
                               v1::ExchangeCatalogResponse* response) override;
  grpc::Status ExchangeLocality(grpc::ServerContext* context,
                                const v1::ExchangeLocalityRequest* request,
                                v1::ExchangeLocalityResponse* response) override;

 private:
  // Who made the call, if they may make it. A refused change (`change`
  // non-empty) is audited.
  absl::StatusOr<Caller> Authorize(const grpc::ServerContextBase& context, std::string_view method,
                                   AccessPolicy::Action action, std::string_view change = {});
  // Whether `caller` may read the file `request` reads from (AllowFileRead).
  absl::Status AllowRead(const Caller& caller, const v1::ReadChunkRequest& request);
  // Whether `caller` is shown a dataset's older versions: administrators
  // and cluster members only, since an older version keeps the permissions
  // the source had then.
  bool SeesOlderVersions(const Caller& caller) const;
  absl::Status StreamChunk(const v1::ReadChunkRequest& request,
                           grpc::ServerWriter<v1::ReadChunkResponse>* writer);

  const ServiceParts parts_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_SERVICE_H_
