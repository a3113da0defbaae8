#include "cache_server/service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "cache_server/prewarm.h"
#include "common/chunk_key.h"
#include "common/logging.h"
#include "common/status.h"

namespace granary {
namespace {

// Errors go back to the client as they are (their messages name the problem);
// the log keeps them at debug level, since bad requests are the caller's.
grpc::Status Answer(const absl::Status& status, const char* operation) {
  if (!status.ok()) {
    GRANARY_LOG(DEBUG) << operation << ": " << status;
  }
  return ToGrpcStatus(status);
}

}  // namespace

GranaryService::GranaryService(NodeIdentity identity, unsigned default_prewarm_parallelism,
                               Catalog* catalog, DatasetRegistry* registry,
                               ReadThrough* read_through, store::ChunkStore* store,
                               ServerMetrics* metrics, VersionActivity* activity)
    : identity_(std::move(identity)),
      default_prewarm_parallelism_(default_prewarm_parallelism),
      catalog_(catalog),
      registry_(registry),
      read_through_(read_through),
      store_(store),
      metrics_(metrics),
      activity_(activity),
      started_(std::chrono::steady_clock::now()) {}

grpc::Status GranaryService::AddDataset(grpc::ServerContext*, const v1::AddDatasetRequest* request,
                                        v1::DatasetInfo* response) {
  absl::StatusOr<v1::DatasetInfo> info =
      registry_->Add(request->name(), request->source(), request->chunk_size());
  if (info.ok()) {
    GRANARY_LOG(INFO) << "registered dataset '" << request->name() << "' version "
                      << FormatVersion(info->version());
    *response = *std::move(info);
  }
  return Answer(info.status(), "AddDataset");
}

grpc::Status GranaryService::ListDatasets(grpc::ServerContext*, const v1::ListDatasetsRequest*,
                                          v1::ListDatasetsResponse* response) {
  for (v1::DatasetInfo& info : registry_->List()) *response->add_datasets() = std::move(info);
  return grpc::Status::OK;
}

grpc::Status GranaryService::GetDataset(grpc::ServerContext*, const v1::GetDatasetRequest* request,
                                        v1::DatasetInfo* response) {
  absl::StatusOr<v1::DatasetInfo> info = registry_->Get(request->name());
  if (info.ok()) *response = *std::move(info);
  return Answer(info.status(), "GetDataset");
}

grpc::Status GranaryService::RefreshDataset(grpc::ServerContext*,
                                            const v1::RefreshDatasetRequest* request,
                                            v1::DatasetInfo* response) {
  absl::StatusOr<v1::DatasetInfo> info = registry_->Refresh(request->name());
  if (info.ok()) *response = *std::move(info);
  return Answer(info.status(), "RefreshDataset");
}

grpc::Status GranaryService::RemoveDataset(grpc::ServerContext*,
                                           const v1::RemoveDatasetRequest* request,
                                           v1::RemoveDatasetResponse* response) {
  absl::StatusOr<uint64_t> freed = registry_->Remove(request->name());
  if (freed.ok()) {
    GRANARY_LOG(INFO) << "removed dataset '" << request->name() << "'";
    response->set_freed_bytes(*freed);
  }
  return Answer(freed.status(), "RemoveDataset");
}

grpc::Status GranaryService::GetManifest(grpc::ServerContext* context,
                                         const v1::GetManifestRequest* request,
                                         grpc::ServerWriter<v1::ManifestPage>* writer) {
  absl::StatusOr<v1::DatasetInfo> info = registry_->Get(request->name());
  if (!info.ok()) return Answer(info.status(), "GetManifest");
  uint64_t version = request->version() == 0 ? info->version() : request->version();
  bool known = version == info->version() ||
               std::find(info->older_versions().begin(), info->older_versions().end(), version) !=
                   info->older_versions().end();
  if (!known) {
    return Answer(absl::NotFoundError(absl::StrCat("dataset '", request->name(),
                                                   "' has no version ", FormatVersion(version))),
                  "GetManifest");
  }
  absl::StatusOr<std::shared_ptr<const Manifest>> manifest = catalog_->GetManifest(version);
  if (!manifest.ok()) return Answer(manifest.status(), "GetManifest");
  const std::vector<ManifestEntry>& entries = (*manifest)->entries();
  size_t next = 0;
  do {
    v1::ManifestPage page;
    if (next == 0) *page.mutable_dataset() = *info;
    size_t end = std::min(entries.size(), next + Catalog::kManifestPageEntries);
    for (; next < end; ++next) entries[next].ToProto(page.add_entries());
    if (context->IsCancelled() || !writer->Write(page)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
    }
  } while (next < entries.size());
  return grpc::Status::OK;
}

grpc::Status GranaryService::ReadChunk(grpc::ServerContext*, const v1::ReadChunkRequest* request,
                                       grpc::ServerWriter<v1::ReadChunkResponse>* writer) {
  absl::Status streamed = StreamChunk(*request, writer);
  if (!streamed.ok()) metrics_->read_errors.fetch_add(1, std::memory_order_relaxed);
  return Answer(streamed, "ReadChunk");
}

absl::Status GranaryService::StreamChunk(const v1::ReadChunkRequest& request,
                                         grpc::ServerWriter<v1::ReadChunkResponse>* writer) {
  if (!request.has_key()) return absl::InvalidArgumentError("read request names no chunk key");
  ChunkKey key{request.key().dataset_version(), request.key().file_id(),
               request.key().chunk_index()};
  auto started = std::chrono::steady_clock::now();
  GRANARY_ASSIGN_OR_RETURN(ReadThrough::Chunk chunk, read_through_->Read(key));
  metrics_->read_latency.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  const std::string& data = *chunk.data;
  if (request.offset() > data.size()) {
    return absl::OutOfRangeError(absl::StrCat("offset ", request.offset(),
                                              " is past the end of chunk ", key.ToString(), " (",
                                              data.size(), " bytes)"));
  }
  size_t end = request.length() == 0
                   ? data.size()
                   : std::min<size_t>(data.size(), size_t{request.offset()} + request.length());
  size_t position = request.offset();
  do {
    v1::ReadChunkResponse response;
    if (position == request.offset()) response.set_from_cache(chunk.from_cache);
    size_t piece = std::min(kMaxReadMessageBytes, end - position);
    response.set_data(data.data() + position, piece);
    position += piece;
    if (!writer->Write(response)) return absl::CancelledError("the client went away");
  } while (position < end);
  return absl::OkStatus();
}

grpc::Status GranaryService::Prewarm(grpc::ServerContext* context,
                                     const v1::PrewarmRequest* request,
                                     grpc::ServerWriter<v1::PrewarmProgress>* writer) {
  return Answer(RunPrewarm(context, *request, writer), "Prewarm");
}

absl::Status GranaryService::RunPrewarm(grpc::ServerContext* context,
                                        const v1::PrewarmRequest& request,
                                        grpc::ServerWriter<v1::PrewarmProgress>* writer) {
  if (request.parallelism() > kMaxPrewarmParallelism) {
    return absl::InvalidArgumentError(absl::StrCat("prewarm parallelism ", request.parallelism(),
                                                   " is over the maximum, ",
                                                   kMaxPrewarmParallelism));
  }
  GRANARY_ASSIGN_OR_RETURN(v1::CatalogDataset record, catalog_->Get(request.name()));
  uint64_t version = record.versions().rbegin()->version();
  GRANARY_ASSIGN_OR_RETURN(std::shared_ptr<const Manifest> manifest,
                           catalog_->GetManifest(version));
  std::vector<std::string> paths(request.paths().begin(), request.paths().end());
  GRANARY_ASSIGN_OR_RETURN(std::vector<uint64_t> files, SelectFiles(*manifest, paths));
  unsigned parallelism =
      request.parallelism() == 0 ? default_prewarm_parallelism_ : request.parallelism();
  GRANARY_LOG(INFO) << "prewarming " << files.size() << " files of dataset '" << request.name()
                    << "' with " << parallelism << " workers";
  activity_->Touch(version);
  PrewarmJob job(manifest, std::move(files), parallelism, read_through_, store_, metrics_);
  while (true) {
    bool finished = job.WaitFor(kPrewarmProgressInterval);
    activity_->Touch(version);
    if (context->IsCancelled()) {
      GRANARY_LOG(INFO) << "prewarm of dataset '" << request.name() << "' cancelled";
      return absl::CancelledError("prewarm cancelled");
    }
    if (!writer->Write(job.Progress())) {
      return absl::CancelledError("the client went away");
    }
    if (finished) return absl::OkStatus();
  }
}

grpc::Status GranaryService::Status(grpc::ServerContext*, const v1::StatusRequest*,
                                    v1::StatusResponse* response) {
  store::StoreStats stats = store_->Stats();
  v1::NodeStatus* node = response->add_nodes();
  node->set_node_id(identity_.node_id);
  node->set_group(identity_.group);
  node->set_address(identity_.address);
  node->set_state("up");
  node->set_capacity_bytes(stats.capacity_bytes);
  node->set_used_bytes(stats.used_bytes);
  node->set_chunk_count(stats.chunk_count);
  node->set_hits(metrics_->hits.load());
  node->set_misses(metrics_->misses.load());
  node->set_bytes_from_cache(metrics_->bytes_from_cache.load());
  node->set_bytes_from_source(metrics_->bytes_from_source.load());
  node->set_checksum_failures(stats.checksum_failures);
  node->set_io_engine(stats.io_engine);
  node->set_uptime_seconds(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_)
          .count());
  response->set_dataset_count(catalog_->Size());
  return grpc::Status::OK;
}

grpc::Status GranaryService::Locate(grpc::ServerContext*, const v1::LocateRequest* request,
                                    v1::LocateResponse* response) {
  absl::StatusOr<v1::DatasetInfo> info = registry_->Get(request->name());
  if (!info.ok()) return Answer(info.status(), "Locate");
  response->set_name(info->name());
  response->set_version(info->version());
  response->set_total_bytes(info->total_bytes());
  uint64_t cached = info->cached_bytes();
  // A single node is a group of one: its share is its group's share.
  double fraction = info->total_bytes() == 0
                        ? 1.0
                        : static_cast<double>(cached) / static_cast<double>(info->total_bytes());
  v1::NodeLocality* node = response->add_nodes();
  node->set_node_id(identity_.node_id);
  node->set_group(identity_.group);
  node->set_cached_bytes(cached);
  node->set_node_fraction(fraction);
  node->set_group_fraction(fraction);
  v1::GroupLocality* group = response->add_groups();
  group->set_group(identity_.group);
  group->set_cached_bytes(cached);
  group->set_fraction(fraction);
  return grpc::Status::OK;
}

}  // namespace granary
