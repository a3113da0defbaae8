// GranaryService is the gRPC face of one granaryd node (package granary.v1):
// datasets, manifests, chunk reads, prewarm, status and locate. It validates
// requests and maps every error to a gRPC status with the matching code and a
// message naming what was wrong; a bad request never affects other callers.
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
#include <string>

#include "cache_server/catalog.h"
#include "cache_server/dataset_registry.h"
#include "cache_server/metrics.h"
#include "cache_server/read_through.h"
#include "cache_server/store/chunk_store.h"
#include "cache_server/version_activity.h"
#include "proto/granary.grpc.pb.h"

namespace granary {

struct NodeIdentity {
  std::string node_id;
  std::string group;
  std::string address;  // TCP address peers reach this node at.
};

class GranaryService final : public v1::Granary::Service {
 public:
  static constexpr size_t kMaxReadMessageBytes = 1 << 20;
  static constexpr std::chrono::milliseconds kPrewarmProgressInterval{100};
  static constexpr unsigned kMaxPrewarmParallelism = 256;

  GranaryService(NodeIdentity identity, unsigned default_prewarm_parallelism, Catalog* catalog,
                 DatasetRegistry* registry, ReadThrough* read_through, store::ChunkStore* store,
                 ServerMetrics* metrics, VersionActivity* activity);

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

 private:
  absl::Status StreamChunk(const v1::ReadChunkRequest& request,
                           grpc::ServerWriter<v1::ReadChunkResponse>* writer);
  absl::Status RunPrewarm(grpc::ServerContext* context, const v1::PrewarmRequest& request,
                          grpc::ServerWriter<v1::PrewarmProgress>* writer);

  const NodeIdentity identity_;
  const unsigned default_prewarm_parallelism_;
  Catalog* const catalog_;
  DatasetRegistry* const registry_;
  ReadThrough* const read_through_;
  store::ChunkStore* const store_;
  ServerMetrics* const metrics_;
  VersionActivity* const activity_;
  const std::chrono::steady_clock::time_point started_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_SERVICE_H_
