#include "cache_server/prewarm/prewarm_coordinator.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cache_server/catalog/dataset_registry.h"
#include "cache_server/prewarm/group_prewarm.h"
#include "cache_server/prewarm/prewarm_job.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/dataset/chunk_key.h"

namespace granary {
namespace {

// The failure, without a path, that says which files of a plan were left out.
v1::FileFailure NotPermitted(uint64_t files, const absl::Status& first) {
  v1::FileFailure failure;
  failure.set_error(
      absl::StrCat(files, " files left out: the caller may not read them (", first.message(), ")"));
  return failure;
}

}  // namespace

PrewarmCoordinator::PrewarmCoordinator(Parts parts, Options options)
    : parts_(parts),
      max_paths_(options.max_paths),
      limits_(options.limits),
      shares_(parts.store, options.user_share_bytes, std::move(options.user_share_text)) {}

std::optional<Caller> PrewarmCoordinator::UserOf(const Caller& caller) const {
  // A cluster member carries out a share its coordinator admitted.
  if (caller.channel == Caller::Channel::kTcp) return std::nullopt;
  if (parts_.policy->Allow(caller, AccessPolicy::Action::kAdminister, "Prewarm").ok()) {
    return std::nullopt;
  }
  return caller;
}

absl::Status PrewarmCoordinator::Run(const Caller& caller, const v1::PrewarmRequest& request,
                                     const Report& report, const Cancelled& cancelled) {
  if (static_cast<size_t>(request.paths_size()) > max_paths_) {
    return absl::InvalidArgumentError(absl::StrCat("a prewarm names ", request.paths_size(),
                                                   " paths, over the maximum of ", max_paths_,
                                                   "; name their directories instead"));
  }
  const Member& self = parts_.cluster->self();
  if (request.owned_share_only() && request.group() != self.group) {
    return absl::InvalidArgumentError(absl::StrCat("node '", self.id, "' is in cache group '",
                                                   self.group, "', not '", request.group(), "'"));
  }
  v1::PrewarmRequest admitted = request;
  if (admitted.group().empty()) admitted.set_group(self.group);
  bool local = request.owned_share_only();
  if (!local) {
    std::vector<Member> members = parts_.cluster->GroupMembers(admitted.group());
    local = members.size() == 1 && members.front().id == self.id;
  }
  const std::optional<Caller> user = UserOf(caller);
  GRANARY_ASSIGN_OR_RETURN(
      PrewarmLimits::Ticket ticket,
      limits_.Admit(user ? std::optional<uid_t>(user->credentials.uid) : std::nullopt,
                    request.parallelism(), local));
  admitted.set_parallelism(ticket.parallelism());
  if (local) return RunLocalShare(user, admitted, report, cancelled);
  return RunGroup(user, std::move(admitted), report, cancelled);
}

absl::StatusOr<PrewarmCoordinator::Plan> PrewarmCoordinator::PlanFor(
    const std::optional<Caller>& user, const v1::PrewarmRequest& request) const {
  GRANARY_RETURN_IF_ERROR(ValidateDatasetName(request.name()));
  GRANARY_ASSIGN_OR_RETURN(v1::CatalogDataset record, parts_.catalog->Get(request.name()));
  Plan plan;
  GRANARY_ASSIGN_OR_RETURN(plan.manifest,
                           parts_.catalog->GetManifest(record.versions().rbegin()->version()));
  std::vector<std::string> paths(request.paths().begin(), request.paths().end());
  GRANARY_ASSIGN_OR_RETURN(plan.file_ids, SelectFiles(*plan.manifest, paths));
  plan.replicas = ReplicasOf(record);
  if (!user.has_value()) return plan;
  const size_t asked = plan.file_ids.size();
  std::erase_if(plan.file_ids, [&](uint64_t file_id) {
    absl::Status allowed = parts_.policy->AllowRead(*user, *plan.manifest, file_id);
    if (allowed.ok()) return false;
    if (plan.first_not_permitted.ok()) plan.first_not_permitted = allowed;
    return true;
  });
  plan.files_not_permitted = asked - plan.file_ids.size();
  if (plan.file_ids.empty() && plan.files_not_permitted > 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("the caller may read none of the ", asked,
                     " files asked to prewarm: ", plan.first_not_permitted.message()));
  }
  return plan;
}

absl::Status PrewarmCoordinator::RunGroup(const std::optional<Caller>& user,
                                          v1::PrewarmRequest request, const Report& report,
                                          const Cancelled& cancelled) {
  // Fail fast on what every member would refuse, before fanning out.
  GRANARY_ASSIGN_OR_RETURN(Plan plan, PlanFor(user, request));
  std::optional<v1::FileFailure> left_out;
  if (plan.files_not_permitted > 0) {
    // The owners warm what they are asked: ask for the files the user may read.
    if (plan.file_ids.size() > max_paths_) {
      return absl::FailedPreconditionError(
          absl::StrCat("the caller may read ", plan.file_ids.size(),
                       " of the files asked to prewarm, more than ",
                       "a group prewarm may name (max_prewarm_paths: ", max_paths_,
                       "); name only files or directories it may read"));
    }
    request.clear_paths();
    for (uint64_t file_id : plan.file_ids) {
      request.add_paths(plan.manifest->entries()[file_id].path);
    }
    left_out = NotPermitted(plan.files_not_permitted, plan.first_not_permitted);
  }
  plan = Plan();  // The members plan for themselves; hold no manifest meanwhile.
  GroupPrewarm prewarm(parts_.cluster, std::move(request), kProgressInterval);
  bool client_gone = false;
  absl::Status ran = prewarm.Run(
      [&](v1::PrewarmProgress progress) {
        if (left_out.has_value()) *progress.add_failures() = *left_out;
        client_gone = client_gone || !report(progress);
        return !client_gone;
      },
      cancelled);
  if (client_gone) return absl::CancelledError("the client went away");
  return ran;
}

absl::Status PrewarmCoordinator::RunLocalShare(const std::optional<Caller>& user,
                                               const v1::PrewarmRequest& request,
                                               const Report& report, const Cancelled& cancelled) {
  GRANARY_ASSIGN_OR_RETURN(Plan plan, PlanFor(user, request));
  const uint64_t version = plan.manifest->version();
  std::vector<std::string> unreachable(request.unreachable_members().begin(),
                                       request.unreachable_members().end());
  PrewarmJob::Hooks hooks;
  hooks.filter = [&](const ChunkKey& key) {
    return parts_.cluster->Owns(key, request.group(), unreachable, plan.replicas);
  };
  if (user.has_value()) {
    const uid_t uid = user->credentials.uid;
    shares_.Settle(uid);
    hooks.admit = [this, uid](const ChunkKey& key, uint64_t length) {
      return shares_.Reserve(uid, key, length);
    };
    hooks.not_fetched = [this, uid](const ChunkKey& key) { shares_.Unreserve(uid, key); };
  }
  std::optional<v1::FileFailure> left_out;
  if (plan.files_not_permitted > 0) {
    left_out = NotPermitted(plan.files_not_permitted, plan.first_not_permitted);
  }
  GRANARY_LOG(INFO) << "prewarming " << plan.file_ids.size() << " files of dataset '"
                    << request.name() << "' (this node's share) with " << request.parallelism()
                    << " workers"
                    << (left_out.has_value() ? absl::StrCat("; ", left_out->error()) : "");
  // Only now that the caller may read what it warms does the dataset count
  // as in use.
  parts_.activity->Touch(version);
  PrewarmJob job(plan.manifest, std::move(plan.file_ids), request.parallelism(),
                 parts_.read_through, parts_.store, parts_.metrics, std::move(hooks));
  while (true) {
    const bool finished = job.WaitFor(kProgressInterval);
    parts_.activity->Touch(version);
    if (cancelled()) {
      GRANARY_LOG(INFO) << "prewarm of dataset '" << request.name() << "' cancelled";
      return absl::CancelledError("prewarm cancelled");
    }
    v1::PrewarmProgress progress = job.Progress();
    progress.set_nodes(1);
    if (left_out.has_value()) *progress.add_failures() = *left_out;
    if (!report(progress)) return absl::CancelledError("the client went away");
    if (finished) return job.Stopped();
  }
}

}  // namespace granary
