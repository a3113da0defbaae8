// granary prewarm: has granaryd fetch a dataset (or some of its paths) from the
// source ahead of the job that will read it, showing progress as it goes.
//
// --group and --nodes name the target by cluster membership and are checked
// against the members the server reports. Chunks live with their owners in
// each cache group, so a prewarm targets groups: --nodes means the groups of
// those nodes (readers on a node read from its group), each warmed in turn.
// The connected server coordinates every member of a group.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/interrupt_watcher.h"
#include "cli/json_output.h"
#include "cli/progress_bar.h"
#include "cli/server_connection.h"
#include "common/base/size.h"
#include "common/base/status.h"

namespace granary::cli {
namespace {

struct PrewarmOptions {
  std::string name;
  std::vector<std::string> paths;
  std::string group;
  std::vector<std::string> nodes;
  uint32_t parallelism = 0;  // 0: the server's.
  bool json = false;
};

absl::Status PrewarmGroup(const ServerConnection& server, const PrewarmOptions& options,
                          const std::string& group);

// The cache groups to warm: --group, the groups of --nodes, or "" (the
// connected server's group).
absl::StatusOr<std::set<std::string>> TargetGroups(const ServerConnection& server,
                                                   const PrewarmOptions& options) {
  if (options.group.empty() && options.nodes.empty()) return std::set<std::string>{""};
  GRANARY_ASSIGN_OR_RETURN(v1::GetMembersResponse members,
                           server.Call(&v1::Granary::Stub::GetMembers));
  std::set<std::string> groups;
  std::map<std::string, std::string> group_of;
  for (const v1::MemberInfo& member : members.members()) {
    groups.insert(member.group());
    group_of[member.id()] = member.group();
  }
  if (!options.group.empty()) {
    if (!groups.contains(options.group)) {
      return absl::NotFoundError(absl::StrCat("no cache group '", options.group,
                                              "' (groups: ", absl::StrJoin(groups, ", "), ")"));
    }
    return std::set<std::string>{options.group};
  }
  std::set<std::string> targets;
  for (const std::string& node : options.nodes) {
    auto it = group_of.find(node);
    if (it == group_of.end()) {
      std::vector<std::string> ids;
      for (const auto& [id, group] : group_of) ids.push_back(id);
      return absl::NotFoundError(
          absl::StrCat("no node '", node, "' (nodes: ", absl::StrJoin(ids, ", "), ")"));
    }
    targets.insert(it->second);
  }
  return targets;
}

void PrintSummary(const std::string& name, const v1::PrewarmProgress& progress, double seconds) {
  std::cout << absl::StreamFormat(
      "prewarmed '%s' on %d node%s: %s of %s, %d of %d chunks (%d were already cached) in %.1f "
      "s, %s\n",
      name, progress.nodes(), progress.nodes() == 1 ? "" : "s",
      FormatPercent(Fraction(progress.bytes_done(), progress.bytes_total())),
      FormatSize(progress.bytes_total()), progress.chunks_done(), progress.chunks_total(),
      progress.chunks_already_cached(), seconds, FormatRate(progress.bytes_per_second()));
  if (progress.failures().empty()) return;
  std::cout << absl::StreamFormat("%s failed:\n", PrewarmFailureCount(progress));
  for (const v1::FileFailure& failure : progress.failures()) {
    // A failure without a path is about the prewarm as a whole.
    if (failure.path().empty()) {
      std::cout << absl::StreamFormat("  %s\n", failure.error());
    } else {
      std::cout << absl::StreamFormat("  %s: %s\n", DisplayName(failure.path()), failure.error());
    }
  }
}

absl::Status RunPrewarm(const GlobalOptions& global, const PrewarmOptions& options) {
  GRANARY_ASSIGN_OR_RETURN(ServerConnection server,
                           ServerConnection::Open(global.server, global.token_file));
  GRANARY_ASSIGN_OR_RETURN(std::set<std::string> groups, TargetGroups(server, options));
  for (const std::string& group : groups) {
    GRANARY_RETURN_IF_ERROR(PrewarmGroup(server, options, group));
  }
  return absl::OkStatus();
}

absl::Status PrewarmGroup(const ServerConnection& server, const PrewarmOptions& options,
                          const std::string& group) {
  v1::PrewarmRequest request;
  request.set_name(options.name);
  request.set_group(group);
  request.set_parallelism(options.parallelism);
  for (const std::string& path : options.paths) request.add_paths(path);

  grpc::ClientContext context;
  // Cancelling the call is what stops the server's work; chunks it already
  // stored stay cached, so running the command again resumes.
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<InterruptWatcher> interrupt,
                           InterruptWatcher::Start([&context] { context.TryCancel(); }));
  ProgressBar bar(stderr, isatty(STDERR_FILENO) == 1, options.name);
  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<grpc::ClientReader<v1::PrewarmProgress>> stream =
      server.stub().Prewarm(&context, request);
  v1::PrewarmProgress progress;
  v1::PrewarmProgress last;
  while (stream->Read(&progress)) {
    bar.Update(progress);
    last = progress;
  }
  grpc::Status status = stream->Finish();
  bar.Finish();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  if (interrupt->interrupted()) {
    return absl::CancelledError(
        absl::StrCat("prewarm of '", options.name, "' interrupted at ",
                     FormatPercent(Fraction(last.bytes_done(), last.bytes_total())),
                     "; what was fetched stays cached, run it again to resume"));
  }
  GRANARY_RETURN_IF_ERROR(server.Check(status));
  if (!last.finished()) {
    return absl::InternalError(absl::StrCat("granaryd at ", server.address(),
                                            " ended the prewarm of '", options.name,
                                            "' without reporting it finished"));
  }
  if (options.json) {
    PrintJson(PrewarmJson(options.name, last, seconds));
  } else {
    PrintSummary(options.name, last, seconds);
  }
  if (!last.failures().empty()) {
    return absl::UnknownError(PrewarmFailuresText(options.name, last));
  }
  return absl::OkStatus();
}

}  // namespace

void AddPrewarmCommand(CLI::App& app, const GlobalOptions& global, Action& action) {
  auto options = std::make_shared<PrewarmOptions>();
  CLI::App* prewarm =
      app.add_subcommand("prewarm", "Fetch a dataset into the cache before it is read");
  prewarm->add_option("NAME", options->name, "Dataset name")->required();
  prewarm->add_option("--paths", options->paths, "Only these files or directories of the dataset");
  CLI::Option* group =
      prewarm->add_option("--group", options->group, "Prewarm into this cache group");
  prewarm->add_option("--nodes", options->nodes, "Prewarm into these nodes (comma-separated)")
      ->delimiter(',')
      ->excludes(group);
  prewarm->add_option("--parallelism", options->parallelism,
                      "Fetch with this many workers on each node (default: the server's; users "
                      "who are not administrators get at most the server's)");
  prewarm->add_flag("--json", options->json, "Print one JSON document when done");
  prewarm->callback([&global, &action, options] {
    action = [&global, options] { return RunPrewarm(global, *options); };
  });
}

}  // namespace granary::cli
