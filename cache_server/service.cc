#include "cache_server/service.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "cache_server/cluster/peer_stub.h"
#include "cache_server/prewarm/group_prewarm.h"
#include "cache_server/prewarm/prewarm.h"
#include "common/chunk_key.h"
#include "common/locality_share.h"
#include "common/logging.h"
#include "common/parallel_for.h"
#include "common/printable.h"
#include "common/status.h"
#include "grpcpp/client_context.h"

namespace granary {
namespace {

// Status and Locate ask every member; a member that does not answer in this
// time once connected is reported unreachable rather than holding up the
// answer.
constexpr std::chrono::seconds kPeerCallTimeout{3};
constexpr size_t kMaxParallelPeerCalls = 32;

// Errors go back to the client as they are (their messages name the problem);
// the log keeps them at debug level, since bad requests are the caller's.
grpc::Status Answer(const absl::Status& status, const char* operation) {
  if (!status.ok()) {
    GRANARY_LOG(DEBUG) << operation << ": " << status;
  }
  return ToGrpcStatus(status);
}

// One line in the log for every change a caller asks for, allowed or not:
// who, what, and the result.
void Audit(const Caller& caller, std::string_view change, const absl::Status& result) {
  GRANARY_LOG(INFO) << "audit: " << DescribeCaller(caller) << ": " << change << ": "
                    << (result.ok() ? std::string("OK") : result.ToString());
}

ChunkSourcing SourcingOf(const v1::ReadChunkRequest& request) {
  if (request.cache_only()) return ChunkSourcing::kCacheOnly;
  return request.owner_fetch() ? ChunkSourcing::kOwnerFetch : ChunkSourcing::kReadThrough;
}

}  // namespace

GranaryService::GranaryService(ServiceParts parts, unsigned default_prewarm_parallelism,
                               size_t max_prewarm_paths)
    : parts_(parts),
      default_prewarm_parallelism_(default_prewarm_parallelism),
      max_prewarm_paths_(max_prewarm_paths),
      started_(std::chrono::steady_clock::now()) {}

absl::StatusOr<Caller> GranaryService::Authorize(const grpc::ServerContextBase& context,
                                                 std::string_view method,
                                                 AccessPolicy::Action action,
                                                 std::string_view change) {
  GRANARY_ASSIGN_OR_RETURN(Caller caller, parts_.authenticator->Authenticate(context, method));
  absl::Status allowed = parts_.policy->Allow(caller, action, method);
  if (!allowed.ok()) {
    if (!change.empty()) Audit(caller, change, allowed);
    return allowed;
  }
  return caller;
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
  for (v1::DatasetInfo& info : parts_.registry->List()) *response->add_datasets() = std::move(info);
  return grpc::Status::OK;
}

grpc::Status GranaryService::GetDataset(grpc::ServerContext* context,
                                        const v1::GetDatasetRequest* request,
                                        v1::DatasetInfo* response) {
  absl::StatusOr<Caller> caller =
      Authorize(*context, "GetDataset", AccessPolicy::Action::kDescribe);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<v1::DatasetInfo> info = parts_.registry->Get(request->name());
  if (info.ok()) *response = *std::move(info);
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
  return parts_.policy->AllowRead(caller, *manifest, request.key().file_id());
}

absl::Status GranaryService::StreamChunk(const v1::ReadChunkRequest& request,
                                         grpc::ServerWriter<v1::ReadChunkResponse>* writer) {
  if (!request.has_key()) return absl::InvalidArgumentError("read request names no chunk key");
  const ChunkKey key = ChunkKey::FromProto(request.key());
  const ChunkSourcing sourcing = SourcingOf(request);
  auto started = std::chrono::steady_clock::now();
  // One message's worth at a time: a reader that stops reading holds one
  // piece of its range here, not the whole range.
  const uint32_t first = request.length() == 0
                             ? kMaxReadMessageBytes
                             : std::min<uint32_t>(request.length(), kMaxReadMessageBytes);
  GRANARY_ASSIGN_OR_RETURN(ReadThrough::Chunk chunk,
                           parts_.read_through->Read(key, request.offset(), first, sourcing));
  parts_.metrics->read_latency.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  const uint64_t end =
      request.length() == 0
          ? chunk.chunk_length
          : std::min<uint64_t>(chunk.chunk_length, uint64_t{request.offset()} + request.length());
  uint64_t position = request.offset();
  ReadThrough::ChunkData piece = std::move(chunk.data);
  v1::ReadChunkResponse response;
  response.set_from_cache(chunk.from_cache);
  while (true) {
    response.set_data(*piece);
    position += piece->size();
    piece.reset();
    if (!writer->Write(response)) return absl::CancelledError("the client went away");
    if (position >= end) return absl::OkStatus();
    response.clear_from_cache();
    const uint32_t length =
        static_cast<uint32_t>(std::min<uint64_t>(kMaxReadMessageBytes, end - position));
    GRANARY_ASSIGN_OR_RETURN(piece, parts_.read_through->ReadMore(
                                        key, static_cast<uint32_t>(position), length, sourcing));
    if (piece->empty()) {
      return absl::InternalError(
          absl::StrCat("chunk ", key.ToString(), " ended at ", position, " of ", end, " bytes"));
    }
  }
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
  absl::Status ran = RunPrewarm(context, *request, writer);
  Audit(*caller, change, ran);
  return Answer(ran, "Prewarm");
}

absl::Status GranaryService::RunPrewarm(grpc::ServerContext* context,
                                        const v1::PrewarmRequest& request,
                                        grpc::ServerWriter<v1::PrewarmProgress>* writer) {
  if (request.parallelism() > kMaxPrewarmParallelism) {
    return absl::InvalidArgumentError(absl::StrCat("prewarm parallelism ", request.parallelism(),
                                                   " is over the maximum, ",
                                                   kMaxPrewarmParallelism));
  }
  if (static_cast<size_t>(request.paths_size()) > max_prewarm_paths_) {
    return absl::InvalidArgumentError(
        absl::StrCat("a prewarm names ", request.paths_size(), " paths, over the maximum of ",
                     max_prewarm_paths_, "; name their directories instead"));
  }
  const Member& self = parts_.cluster->self();
  if (request.owned_share_only()) {
    if (request.group() != self.group) {
      return absl::InvalidArgumentError(absl::StrCat("node '", self.id, "' is in cache group '",
                                                     self.group, "', not '", request.group(), "'"));
    }
    return RunLocalPrewarm(context, request, writer);
  }
  v1::PrewarmRequest group_request = request;
  if (group_request.group().empty()) group_request.set_group(self.group);
  std::vector<Member> members = parts_.cluster->GroupMembers(group_request.group());
  if (members.size() == 1 && members.front().id == self.id) {
    return RunLocalPrewarm(context, group_request, writer);
  }
  // Fail fast on what every member would refuse, before fanning out.
  GRANARY_RETURN_IF_ERROR(PlanPrewarm(request).status());
  GroupPrewarm prewarm(parts_.cluster, std::move(group_request), kPrewarmProgressInterval);
  bool client_gone = false;
  absl::Status ran = prewarm.Run(
      [&](const v1::PrewarmProgress& progress) {
        client_gone = client_gone || !writer->Write(progress);
        return !client_gone;
      },
      [&] { return context->IsCancelled(); });
  if (client_gone) return absl::CancelledError("the client went away");
  return ran;
}

absl::StatusOr<GranaryService::PrewarmPlan> GranaryService::PlanPrewarm(
    const v1::PrewarmRequest& request) {
  GRANARY_RETURN_IF_ERROR(ValidateDatasetName(request.name()));
  GRANARY_ASSIGN_OR_RETURN(v1::CatalogDataset record, parts_.catalog->Get(request.name()));
  PrewarmPlan plan;
  GRANARY_ASSIGN_OR_RETURN(plan.manifest,
                           parts_.catalog->GetManifest(record.versions().rbegin()->version()));
  std::vector<std::string> paths(request.paths().begin(), request.paths().end());
  GRANARY_ASSIGN_OR_RETURN(plan.file_ids, SelectFiles(*plan.manifest, paths));
  plan.replicas = ReplicasOf(record);
  return plan;
}

absl::Status GranaryService::RunLocalPrewarm(grpc::ServerContext* context,
                                             const v1::PrewarmRequest& request,
                                             grpc::ServerWriter<v1::PrewarmProgress>* writer) {
  GRANARY_ASSIGN_OR_RETURN(PrewarmPlan plan, PlanPrewarm(request));
  const uint64_t version = plan.manifest->version();
  unsigned parallelism =
      request.parallelism() == 0 ? default_prewarm_parallelism_ : request.parallelism();
  std::vector<std::string> unreachable(request.unreachable_members().begin(),
                                       request.unreachable_members().end());
  const std::string group =
      request.group().empty() ? parts_.cluster->self().group : request.group();
  PrewarmJob::ChunkFilter owned = [&](const ChunkKey& key) {
    return parts_.cluster->Owns(key, group, unreachable, plan.replicas);
  };
  GRANARY_LOG(INFO) << "prewarming " << plan.file_ids.size() << " files of dataset '"
                    << request.name() << "' (this node's share) with " << parallelism << " workers";
  parts_.activity->Touch(version);
  PrewarmJob job(plan.manifest, std::move(plan.file_ids), parallelism, parts_.read_through,
                 parts_.store, &parts_.metrics->prewarm,
                 {.filter = owned, .yield = {}, .wanted = {}});
  while (true) {
    bool finished = job.WaitFor(kPrewarmProgressInterval);
    parts_.activity->Touch(version);
    if (context->IsCancelled()) {
      GRANARY_LOG(INFO) << "prewarm of dataset '" << request.name() << "' cancelled";
      return absl::CancelledError("prewarm cancelled");
    }
    v1::PrewarmProgress progress = job.Progress();
    progress.set_nodes(1);
    if (!writer->Write(progress)) return absl::CancelledError("the client went away");
    if (finished) return absl::OkStatus();
  }
}

v1::NodeStatus GranaryService::LocalStatus() const {
  store::StoreStats stats = parts_.store->Stats();
  const Member& self = parts_.cluster->self();
  v1::NodeStatus node;
  node.set_node_id(self.id);
  node.set_group(self.group);
  node.set_address(self.address);
  node.set_state("up");
  node.set_capacity_bytes(stats.capacity_bytes);
  node.set_used_bytes(stats.used_bytes);
  node.set_chunk_count(stats.chunk_count);
  node.set_hits(parts_.metrics->hits.load());
  node.set_misses(parts_.metrics->misses.load());
  node.set_bytes_from_cache(parts_.metrics->bytes_from_cache.load());
  node.set_bytes_from_source(parts_.metrics->bytes_from_source.load());
  node.set_checksum_failures(stats.checksum_failures);
  node.set_io_engine(stats.io_engine);
  node.set_uptime_seconds(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_)
          .count());
  for (v1::FillProgress& fill : parts_.fills->Progress()) *node.add_fills() = std::move(fill);
  for (v1::UnloadableDataset& unloadable : parts_.catalog->Unloadable()) {
    *node.add_unloadable_datasets() = std::move(unloadable);
  }
  return node;
}

void GranaryService::AskPeers(
    const std::vector<Member>& peers,
    const std::function<grpc::Status(v1::Granary::Stub&, grpc::ClientContext*, size_t)>& ask) {
  ParallelFor(peers.size(), kMaxParallelPeerCalls, [&](size_t i) {
    absl::StatusOr<std::unique_ptr<v1::Granary::Stub>> stub =
        ConnectToPeer(parts_.cluster->clients(), peers[i]);
    if (!stub.ok()) {
      GRANARY_LOG(DEBUG) << "peer " << peers[i].id << " not asked: " << stub.status().message();
      return;
    }
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kPeerCallTimeout);
    grpc::Status status = ask(**stub, &context, i);
    if (!status.ok()) {
      GRANARY_LOG(DEBUG) << "peer " << peers[i].id << " did not answer: " << status.error_message();
    }
  });
}

grpc::Status GranaryService::Status(grpc::ServerContext* context, const v1::StatusRequest* request,
                                    v1::StatusResponse* response) {
  absl::StatusOr<Caller> caller = Authorize(*context, "Status", AccessPolicy::Action::kDescribe);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  response->set_dataset_count(parts_.catalog->Size());
  *response->add_nodes() = LocalStatus();
  if (request->local_only()) return grpc::Status::OK;
  auto listed = [](const Member& member, const char* state) {
    v1::NodeStatus node;
    node.set_node_id(member.id);
    node.set_group(member.group);
    node.set_address(member.address);
    node.set_state(state);
    return node;
  };
  std::vector<Member> peers = parts_.cluster->Peers();
  std::vector<v1::NodeStatus> statuses;
  for (const Member& peer : peers) statuses.push_back(listed(peer, "unreachable"));
  AskPeers(peers, [&](v1::Granary::Stub& stub, grpc::ClientContext* call, size_t i) {
    v1::StatusRequest local;
    local.set_local_only(true);
    v1::StatusResponse answer;
    grpc::Status status = stub.Status(call, local, &answer);
    if (status.ok() && answer.nodes_size() == 1) statuses[i] = answer.nodes(0);
    return status;
  });
  std::shared_ptr<const ClusterMap> members = parts_.cluster->current();
  for (const Member& member : members->members()) {
    if (!member.up) statuses.push_back(listed(member, "down"));
  }
  for (v1::NodeStatus& node : statuses) *response->add_nodes() = std::move(node);
  std::sort(response->mutable_nodes()->begin(), response->mutable_nodes()->end(),
            [](const v1::NodeStatus& a, const v1::NodeStatus& b) {
              return std::tie(a.group(), a.node_id()) < std::tie(b.group(), b.node_id());
            });
  return grpc::Status::OK;
}

absl::StatusOr<v1::LocateResponse> GranaryService::LocateLocally(const std::string& name) {
  GRANARY_ASSIGN_OR_RETURN(v1::DatasetInfo info, parts_.registry->Get(name));
  v1::LocateResponse response;
  response.set_name(info.name());
  response.set_version(info.version());
  response.set_total_bytes(info.total_bytes());
  response.set_replicas(info.replicas());
  v1::NodeLocality* node = response.add_nodes();
  node->set_node_id(parts_.cluster->self().id);
  node->set_group(parts_.cluster->self().group);
  node->set_cached_bytes(info.cached_bytes());
  for (v1::FillProgress& fill : parts_.fills->Progress()) {
    if (fill.version() == info.version()) *node->mutable_fill() = std::move(fill);
  }
  return response;
}

grpc::Status GranaryService::Locate(grpc::ServerContext* context, const v1::LocateRequest* request,
                                    v1::LocateResponse* response) {
  absl::StatusOr<Caller> caller = Authorize(*context, "Locate", AccessPolicy::Action::kDescribe);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<v1::LocateResponse> local = LocateLocally(request->name());
  if (!local.ok()) return Answer(local.status(), "Locate");
  *response = *std::move(local);
  if (!request->local_only()) {
    std::vector<Member> peers = parts_.cluster->Peers();
    std::vector<v1::LocateResponse> answers(peers.size());
    AskPeers(peers, [&](v1::Granary::Stub& stub, grpc::ClientContext* call, size_t i) {
      v1::LocateRequest local_request;
      local_request.set_name(request->name());
      local_request.set_local_only(true);
      return stub.Locate(call, local_request, &answers[i]);
    });
    for (const v1::LocateResponse& answer : answers) {
      // A peer on another version of the dataset (a refresh not yet
      // replicated) holds none of this version's bytes.
      if (answer.version() != response->version()) continue;
      for (const v1::NodeLocality& node : answer.nodes()) *response->add_nodes() = node;
    }
  }
  // Members of a group own distinct copies of its chunks, so a group's bytes
  // are the sum of its members' bytes.
  std::map<std::string, uint64_t> group_bytes;
  for (const v1::NodeLocality& node : response->nodes())
    group_bytes[node.group()] += node.cached_bytes();
  const uint64_t total = response->total_bytes();
  const uint32_t replicas = response->replicas();
  for (v1::NodeLocality& node : *response->mutable_nodes()) {
    node.set_node_fraction(LocalityShare(node.cached_bytes(), total, 1));
    node.set_group_fraction(LocalityShare(group_bytes[node.group()], total, replicas));
  }
  std::sort(response->mutable_nodes()->begin(), response->mutable_nodes()->end(),
            [](const v1::NodeLocality& a, const v1::NodeLocality& b) {
              return std::tie(a.group(), a.node_id()) < std::tie(b.group(), b.node_id());
            });
  for (const auto& [group, bytes] : group_bytes) {
    v1::GroupLocality* locality = response->add_groups();
    locality->set_group(group);
    locality->set_cached_bytes(bytes);
    locality->set_fraction(LocalityShare(bytes, total, replicas));
  }
  return grpc::Status::OK;
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
      Authorize(*context, "ExchangeCatalog", AccessPolicy::Action::kExchangeCatalog);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<v1::ExchangeCatalogResponse> answer = parts_.catalog_sync->Answer(*request);
  if (answer.ok()) *response = *std::move(answer);
  return Answer(answer.status(), "ExchangeCatalog");
}

}  // namespace granary
