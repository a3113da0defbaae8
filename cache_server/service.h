// GranaryService is the gRPC face of one granaryd node (package granary.v1):
// datasets, manifests, chunk reads, prewarm, status and locate. It validates
// requests and maps every error to a gRPC status with the matching code and a
// message naming what was wrong; a bad request never affects other callers.
//
// In a cluster, Status and Locate gather every member's figures (unless the
// request asks for this node only), Prewarm coordinates the whole cache group
// (GroupPrewarm), dataset changes are pushed to every peer before the call
// answers (CatalogSync), and GetMembers tells readers whom to route to.
//
// Every call first learns who its caller is (RequestAuthenticator) and
// whether it may make the call (AccessPolicy); a read by a local caller other
// than root is also checked against the file's owner, group and mode. Every
// change (register, refresh, remove, prewarm) leaves an audit line in the
// log, allowed or refused: who, what, and the result.
//
// Streams: ReadChunk sends at most kMaxReadMessageBytes per message;
// GetManifest sends pages of at most Catalog::kManifestPageEntries entries;
// Prewarm sends progress every kPrewarmProgressInterval and a final message
// with finished=true, and stops its workers when the client goes away.
//
// Thread-safety: gRPC calls handlers concurrently; all state is thread-safe.
#ifndef GRANARY_CACHE_SERVER_SERVICE_H_
#define GRANARY_CACHE_SERVER_SERVICE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cache_server/access/access_policy.h"
#include "cache_server/access/caller.h"
#include "cache_server/access/request_authenticator.h"
#include "cache_server/catalog/catalog.h"
#include "cache_server/catalog/catalog_sync.h"
#include "cache_server/catalog/dataset_registry.h"
#include "cache_server/catalog/version_activity.h"
#include "cache_server/cluster/cluster_view.h"
#include "cache_server/metrics.h"
#include "cache_server/prewarm/fill_scheduler.h"
#include "cache_server/read_path/read_through.h"
#include "cache_server/store/chunk_store.h"
#include "proto/granary.grpc.pb.h"

namespace granary {

// What the service works with; owned by the server.
struct ServiceParts {
  Catalog* catalog;
  DatasetRegistry* registry;
  ReadThrough* read_through;
  store::ChunkStore* store;
  ServerMetrics* metrics;
  VersionActivity* activity;
  ClusterView* cluster;
  CatalogSync* catalog_sync;
  RequestAuthenticator* authenticator;
  const AccessPolicy* policy;
  FillScheduler* fills;
};

class GranaryService final : public v1::Granary::Service {
 public:
  static constexpr size_t kMaxReadMessageBytes = 1 << 20;
  static constexpr std::chrono::milliseconds kPrewarmProgressInterval{100};
  static constexpr unsigned kMaxPrewarmParallelism = 256;

  // `max_prewarm_paths`: the most paths one Prewarm may name.
  GranaryService(ServiceParts parts, unsigned default_prewarm_parallelism,
                 size_t max_prewarm_paths);

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

 private:
  // Who made the call, if they may make it. A refused change (`change`
  // non-empty) is audited.
  absl::StatusOr<Caller> Authorize(const grpc::ServerContextBase& context, std::string_view method,
                                   AccessPolicy::Action action, std::string_view change = {});
  // Whether `caller` may read the file `request` reads from (AccessPolicy::AllowRead).
  absl::Status AllowRead(const Caller& caller, const v1::ReadChunkRequest& request);
  absl::Status StreamChunk(const v1::ReadChunkRequest& request,
                           grpc::ServerWriter<v1::ReadChunkResponse>* writer);
  absl::Status RunPrewarm(grpc::ServerContext* context, const v1::PrewarmRequest& request,
                          grpc::ServerWriter<v1::PrewarmProgress>* writer);
  // The dataset's current manifest and the files a prewarm request selects.
  struct PrewarmPlan {
    std::shared_ptr<const Manifest> manifest;
    std::vector<uint64_t> file_ids;
    uint32_t replicas = 1;  // Copies of each chunk in the group.
  };
  absl::StatusOr<PrewarmPlan> PlanPrewarm(const v1::PrewarmRequest& request);
  // This node's share of a group prewarm (or all of it, alone in its group).
  absl::Status RunLocalPrewarm(grpc::ServerContext* context, const v1::PrewarmRequest& request,
                               grpc::ServerWriter<v1::PrewarmProgress>* writer);
  v1::NodeStatus LocalStatus() const;
  absl::StatusOr<v1::LocateResponse> LocateLocally(const std::string& name);
  // Status or Locate of every member but this one, in parallel; `ask` makes
  // the call with the given stub and context and keeps what it needs.
  void AskPeers(
      const std::vector<Member>& peers,
      const std::function<grpc::Status(v1::Granary::Stub&, grpc::ClientContext*, size_t)>& ask);

  const ServiceParts parts_;
  const unsigned default_prewarm_parallelism_;
  const size_t max_prewarm_paths_;
  const std::chrono::steady_clock::time_point started_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_SERVICE_H_
