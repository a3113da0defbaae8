#include "cache_server/prewarm/prewarm_coordinator.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cache_server/catalog/dataset_registry.h"
#include "cache_server/prewarm/group_prewarm.h"
#include "cache_server/prewarm/prewarm.h"
#include "common/chunk_key.h"
#include "common/logging.h"
#include "common/status.h"

namespace granary {

PrewarmCoordinator::PrewarmCoordinator(Parts parts, unsigned default_parallelism, size_t max_paths)
    : parts_(parts), default_parallelism_(default_parallelism), max_paths_(max_paths) {}

absl::Status PrewarmCoordinator::Run(const v1::PrewarmRequest& request, const Report& report,
                                     const Cancelled& cancelled) const {
  if (request.parallelism() > kMaxParallelism) {
    return absl::InvalidArgumentError(absl::StrCat("prewarm parallelism ", request.parallelism(),
                                                   " is over the maximum, ", kMaxParallelism));
  }
  if (static_cast<size_t>(request.paths_size()) > max_paths_) {
    return absl::InvalidArgumentError(absl::StrCat("a prewarm names ", request.paths_size(),
                                                   " paths, over the maximum of ", max_paths_,
                                                   "; name their directories instead"));
  }
  const Member& self = parts_.cluster->self();
  if (request.owned_share_only()) {
    if (request.group() != self.group) {
      return absl::InvalidArgumentError(absl::StrCat("node '", self.id, "' is in cache group '",
                                                     self.group, "', not '", request.group(), "'"));
    }
    return RunLocalShare(request, report, cancelled);
  }
  v1::PrewarmRequest group_request = request;
  if (group_request.group().empty()) group_request.set_group(self.group);
  std::vector<Member> members = parts_.cluster->GroupMembers(group_request.group());
  if (members.size() == 1 && members.front().id == self.id) {
    return RunLocalShare(group_request, report, cancelled);
  }
  // Fail fast on what every member would refuse, before fanning out.
  GRANARY_RETURN_IF_ERROR(PlanFor(request).status());
  GroupPrewarm prewarm(parts_.cluster, std::move(group_request), kProgressInterval);
  bool client_gone = false;
  absl::Status ran = prewarm.Run(
      [&](const v1::PrewarmProgress& progress) {
        client_gone = client_gone || !report(progress);
        return !client_gone;
      },
      cancelled);
  if (client_gone) return absl::CancelledError("the client went away");
  return ran;
}

absl::StatusOr<PrewarmCoordinator::Plan> PrewarmCoordinator::PlanFor(
    const v1::PrewarmRequest& request) const {
  GRANARY_RETURN_IF_ERROR(ValidateDatasetName(request.name()));
  GRANARY_ASSIGN_OR_RETURN(v1::CatalogDataset record, parts_.catalog->Get(request.name()));
  Plan plan;
  GRANARY_ASSIGN_OR_RETURN(plan.manifest,
                           parts_.catalog->GetManifest(record.versions().rbegin()->version()));
  std::vector<std::string> paths(request.paths().begin(), request.paths().end());
  GRANARY_ASSIGN_OR_RETURN(plan.file_ids, SelectFiles(*plan.manifest, paths));
  plan.replicas = ReplicasOf(record);
  return plan;
}

absl::Status PrewarmCoordinator::RunLocalShare(const v1::PrewarmRequest& request,
                                               const Report& report,
                                               const Cancelled& cancelled) const {
  GRANARY_ASSIGN_OR_RETURN(Plan plan, PlanFor(request));
  const uint64_t version = plan.manifest->version();
  const unsigned parallelism =
      request.parallelism() == 0 ? default_parallelism_ : request.parallelism();
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
                 parts_.store, parts_.metrics,
                 {.filter = owned, .yield = {}, .readers_active = {}, .wanted = {}});
  while (true) {
    const bool finished = job.WaitFor(kProgressInterval);
    parts_.activity->Touch(version);
    if (cancelled()) {
      GRANARY_LOG(INFO) << "prewarm of dataset '" << request.name() << "' cancelled";
      return absl::CancelledError("prewarm cancelled");
    }
    v1::PrewarmProgress progress = job.Progress();
    progress.set_nodes(1);
    if (!report(progress)) return absl::CancelledError("the client went away");
    if (finished) return absl::OkStatus();
  }
}

}  // namespace granary
