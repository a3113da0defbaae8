#include "cache_server/service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "cache_server/access/call_authorization.h"
#include "cache_server/read_path/read_permission.h"
#include "common/base/logging.h"
#include "common/base/printable.h"
#include "common/base/status.h"
#include "common/dataset/chunk_key.h"

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

GranaryService::GranaryService(ServiceParts parts) : parts_(parts) {}

absl::StatusOr<Caller> GranaryService::Authorize(const grpc::ServerContextBase& context,
                                                 std::string_view method,
                                                 AccessPolicy::Action action,
                                                 std::string_view change) {
  return AuthorizeCall(*parts_.authenticator, *parts_.policy, context, method, action, change);
}

grpc::Status GranaryService::AddDataset(grpc::ServerContext* context,
                                        const v1::AddDatasetRequest* request,
                                        v1::DatasetInfo* response) {
  const std::string change = absl::StrCat("AddDataset '", Printable(request->name()), "' from ",
                                          Printable(request->source()));
  absl::StatusOr<Caller> caller =
      Authorize(*context, "AddDataset", AccessPolicy::Action::kAdminister, change);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<v1::DatasetInfo> info =
      parts_.registry->Add(request->name(), request->source(), request->chunk_size(),
                           request->replicas(), request->fill());
  Audit(*caller,
        info.ok() ? absl::StrCat(change, " as version ", FormatVersion(info->version())) : change,
        info.status());
  if (info.ok()) {
    parts_.catalog_sync->PushToAll();
    *response = *std::move(info);
  }
  return Answer(info.status(), "AddDataset");
}

grpc::Status GranaryService::ListDatasets(grpc::ServerContext* context,
                                          const v1::ListDatasetsRequest*,
                                          v1::ListDatasetsResponse* response) {
  absl::StatusOr<Caller> caller =
      Authorize(*context, "ListDatasets", AccessPolicy::Action::kDescribe);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  const bool older_versions = SeesOlderVersions(*caller);
  for (v1::DatasetInfo& info : parts_.registry->List()) {
    if (!older_versions) info.clear_older_versions();
    *response->add_datasets() = std::move(info);
  }
  return grpc::Status::OK;
}

grpc::Status GranaryService::GetDataset(grpc::ServerContext* context,
                                        const v1::GetDatasetRequest* request,
                                        v1::DatasetInfo* response) {
  absl::StatusOr<Caller> caller =
      Authorize(*context, "GetDataset", AccessPolicy::Action::kDescribe);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<v1::DatasetInfo> info = parts_.registry->Get(request->name());
  if (info.ok()) {
    if (!SeesOlderVersions(*caller)) info->clear_older_versions();
    *response = *std::move(info);
  }
  return Answer(info.status(), "GetDataset");
}

grpc::Status GranaryService::RefreshDataset(grpc::ServerContext* context,
                                            const v1::RefreshDatasetRequest* request,
                                            v1::DatasetInfo* response) {
  const std::string change = absl::StrCat("RefreshDataset '", Printable(request->name()), "'");
  absl::StatusOr<Caller> caller =
      Authorize(*context, "RefreshDataset", AccessPolicy::Action::kAdminister, change);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<v1::DatasetInfo> info = parts_.registry->Refresh(request->name());
  Audit(*caller,
        info.ok() ? absl::StrCat(change, " to version ", FormatVersion(info->version())) : change,
        info.status());
  if (info.ok()) {
    parts_.catalog_sync->PushToAll();
    *response = *std::move(info);
  }
  return Answer(info.status(), "RefreshDataset");
}

grpc::Status GranaryService::RemoveDataset(grpc::ServerContext* context,
                                           const v1::RemoveDatasetRequest* request,
                                           v1::RemoveDatasetResponse* response) {
  const std::string change = absl::StrCat("RemoveDataset '", Printable(request->name()), "'");
  absl::StatusOr<Caller> caller =
      Authorize(*context, "RemoveDataset", AccessPolicy::Action::kAdminister, change);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<uint64_t> freed = parts_.registry->Remove(request->name());
  Audit(*caller, change, freed.status());
  if (freed.ok()) {
    parts_.catalog_sync->PushToAll();
    response->set_freed_bytes(*freed);
  }
  return Answer(freed.status(), "RemoveDataset");
}

grpc::Status GranaryService::GetManifest(grpc::ServerContext* context,
                                         const v1::GetManifestRequest* request,
                                         grpc::ServerWriter<v1::ManifestPage>* writer) {
  absl::StatusOr<Caller> caller =
      Authorize(*context, "GetManifest", AccessPolicy::Action::kDescribe);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<v1::DatasetInfo> info = parts_.registry->Get(request->name());
  if (!info.ok()) return Answer(info.status(), "GetManifest");
  uint64_t version = request->version() == 0 ? info->version() : request->version();
  bool known = version == info->version() ||
               std::find(info->older_versions().begin(), info->older_versions().end(), version) !=
                   info->older_versions().end();
  const bool older_versions = SeesOlderVersions(*caller);
  if (known && version != info->version() && !older_versions) {
    return Answer(absl::PermissionDeniedError(absl::StrCat(
                      "version ", FormatVersion(version), " of dataset '", request->name(),
                      "' is an older version, which only administrators may list; the current "
                      "one is ",
                      FormatVersion(info->version()))),
                  "GetManifest");
  }
  if (!older_versions) info->clear_older_versions();
  if (!known) {
    return Answer(absl::NotFoundError(absl::StrCat("dataset '", request->name(),
                                                   "' has no version ", FormatVersion(version))),
                  "GetManifest");
  }
  absl::StatusOr<std::shared_ptr<const Manifest>> manifest = parts_.catalog->GetManifest(version);
  if (!manifest.ok()) return Answer(manifest.status(), "GetManifest");
  const ManifestEntries& entries = (*manifest)->entries();
  // One page is refilled for every write: its entries keep their strings'
  // memory, where a page per write would allocate and free every field.
  v1::ManifestPage page;
  *page.mutable_dataset() = *info;
  size_t next = 0;
  do {
    size_t end = std::min(entries.size(), next + Catalog::kManifestPageEntries);
    for (; next < end; ++next) entries[next].ToProto(page.add_entries());
    if (context->IsCancelled() || !writer->Write(page)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
    }
    page.clear_dataset();
    page.mutable_entries()->Clear();
  } while (next < entries.size());
  return grpc::Status::OK;
}

grpc::Status GranaryService::ReadChunk(grpc::ServerContext* context,
                                       const v1::ReadChunkRequest* request,
                                       grpc::ServerWriter<v1::ReadChunkResponse>* writer) {
  absl::StatusOr<Caller> caller = Authorize(*context, "ReadChunk", AccessPolicy::Action::kRead);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::Status streamed = AllowRead(*caller, *request);
  if (streamed.ok()) streamed = StreamChunk(*request, writer);
  if (!streamed.ok()) parts_.metrics->read_errors.fetch_add(1, std::memory_order_relaxed);
  return Answer(streamed, "ReadChunk");
}

absl::Status GranaryService::AllowRead(const Caller& caller, const v1::ReadChunkRequest& request) {
  if (!AccessPolicy::ChecksFiles(caller)) return absl::OkStatus();
  if (!request.has_key()) return absl::InvalidArgumentError("read request names no chunk key");
  GRANARY_ASSIGN_OR_RETURN(std::shared_ptr<const Manifest> manifest,
                           parts_.catalog->GetManifest(request.key().dataset_version()));
  return AllowFileRead(*parts_.policy, *parts_.catalog, caller, manifest, request.key().file_id());
}

bool GranaryService::SeesOlderVersions(const Caller& caller) const {
  return parts_.policy->Allow(caller, AccessPolicy::Action::kAdminister, "ListOlderVersions").ok();
}

absl::Status GranaryService::StreamChunk(const v1::ReadChunkRequest& request,
                                         grpc::ServerWriter<v1::ReadChunkResponse>* writer) {
  if (!request.has_key()) return absl::InvalidArgumentError("read request names no chunk key");
  // One message a piece: the first says whether the range came from the cache.
  class Messages : public ReadThrough::RangeSink {
   public:
    explicit Messages(grpc::ServerWriter<v1::ReadChunkResponse>* writer) : writer_(writer) {}
    bool Begin(uint64_t, bool from_cache) override {
      response_.set_from_cache(from_cache);
      return true;
    }
    bool Write(std::string_view piece) override {
      response_.set_data(std::string(piece));
      bool written = writer_->Write(response_);
      response_.clear_from_cache();
      return written;
    }

   private:
    grpc::ServerWriter<v1::ReadChunkResponse>* const writer_;
    v1::ReadChunkResponse response_;
  } messages(writer);
  return parts_.read_through->Serve(ChunkKey::FromProto(request.key()), request.offset(),
                                    request.length(), SourcingOf(request), kMaxReadMessageBytes,
                                    messages);
}

grpc::Status GranaryService::Prewarm(grpc::ServerContext* context,
                                     const v1::PrewarmRequest* request,
                                     grpc::ServerWriter<v1::PrewarmProgress>* writer) {
  const std::string change = absl::StrCat(
      "Prewarm '", Printable(request->name()), "'",
      request->group().empty() ? "" : absl::StrCat(" in group '", Printable(request->group()), "'"),
      request->owned_share_only() ? " (this node's share)" : "",
      request->paths_size() == 0 ? "" : absl::StrCat(", ", request->paths_size(), " paths"));
  absl::StatusOr<Caller> caller =
      Authorize(*context, "Prewarm", AccessPolicy::Action::kPrewarm, change);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  // Failures are cumulative: the last message lists them all.
  int failures = 0;
  std::string first_failure;
  absl::Status ran = parts_.prewarms->Run(
      *caller, *request,
      [writer, &failures, &first_failure](const v1::PrewarmProgress& progress) {
        if (failures == 0 && progress.failures_size() > 0) {
          first_failure = progress.failures(0).error();
        }
        failures = progress.failures_size();
        return writer->Write(progress);
      },
      [context] { return context->IsCancelled(); });
  // A prewarm that ran to its end with files it could not warm is audited
  // as what it was, not as OK.
  Audit(*caller, change,
        ran.ok() && failures > 0
            ? absl::AbortedError(absl::StrCat(failures, " failures; the first: ", first_failure))
            : ran);
  return Answer(ran, "Prewarm");
}

grpc::Status GranaryService::Status(grpc::ServerContext* context, const v1::StatusRequest* request,
                                    v1::StatusResponse* response) {
  absl::StatusOr<Caller> caller = Authorize(*context, "Status", AccessPolicy::Action::kDescribe);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  *response = parts_.status->Status(request->local_only());
  return grpc::Status::OK;
}

grpc::Status GranaryService::Locate(grpc::ServerContext* context, const v1::LocateRequest* request,
                                    v1::LocateResponse* response) {
  absl::StatusOr<Caller> caller = Authorize(*context, "Locate", AccessPolicy::Action::kDescribe);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<v1::LocateResponse> located =
      parts_.status->Locate(request->name(), request->local_only(), request->fresh());
  if (located.ok()) *response = *std::move(located);
  return Answer(located.status(), "Locate");
}

grpc::Status GranaryService::GetMembers(grpc::ServerContext* context, const v1::GetMembersRequest*,
                                        v1::GetMembersResponse* response) {
  absl::StatusOr<Caller> caller =
      Authorize(*context, "GetMembers", AccessPolicy::Action::kDescribe);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  response->set_self_id(parts_.cluster->self().id);
  std::shared_ptr<const ClusterMap> members = parts_.cluster->current();
  for (const Member& member : members->members()) {
    v1::MemberInfo* info = response->add_members();
    info->set_id(member.id);
    info->set_address(member.address);
    info->set_group(member.group);
    info->set_weight(member.weight);
    info->set_up(member.up);
  }
  return grpc::Status::OK;
}

grpc::Status GranaryService::ExchangeCatalog(grpc::ServerContext* context,
                                             const v1::ExchangeCatalogRequest* request,
                                             v1::ExchangeCatalogResponse* response) {
  absl::StatusOr<Caller> caller =
      Authorize(*context, "ExchangeCatalog", AccessPolicy::Action::kPeerExchange);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<v1::ExchangeCatalogResponse> answer = parts_.catalog_sync->Answer(*request);
  if (answer.ok()) *response = *std::move(answer);
  return Answer(answer.status(), "ExchangeCatalog");
}

grpc::Status GranaryService::ExchangeLocality(grpc::ServerContext* context,
                                              const v1::ExchangeLocalityRequest* request,
                                              v1::ExchangeLocalityResponse* response) {
  absl::StatusOr<Caller> caller =
      Authorize(*context, "ExchangeLocality", AccessPolicy::Action::kPeerExchange);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<v1::ExchangeLocalityResponse> answer = parts_.locality->Answer(*request);
  if (answer.ok()) *response = *std::move(answer);
  return Answer(answer.status(), "ExchangeLocality");
}

}  // namespace granary
