// granary jobs: what each job read on this node, how long its readers
// waited, and where their bytes came from.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_output.h"
#include "cli/server_connection.h"
#include "cli/table.h"
#include "common/absl_compat.h"
#include "common/read_origin.h"
#include "common/size.h"
#include "common/status.h"
#include "common/wall_clock.h"
#include "grpcpp/client_context.h"
#include "proto/jobs.grpc.pb.h"

namespace granary::cli {
namespace {

using Align = Table::Align;

struct JobsOptions {
  bool group = false;
  bool json = false;
};

uint64_t At(const google::protobuf::RepeatedField<uint64_t>& values, int index) {
  return index < values.size() ? values.Get(index) : 0;
}

// "source 82%": the origin most of the read wait went to, and its share.
std::string WaitMostlyOn(const v1::JobReads& job) {
  uint64_t total = 0;
  int most = -1;
  for (int origin = 0; origin < kReadOrigins; ++origin) {
    const uint64_t wait = At(job.wait_ns(), origin);
    total += wait;
    if (wait > 0 && (most < 0 || wait > At(job.wait_ns(), most))) most = origin;
  }
  if (most < 0) return "-";
  return absl::StrCat(AsAbsl(ReadOriginName(static_cast<ReadOrigin>(most))), " ",
                      FormatPercent(static_cast<double>(At(job.wait_ns(), most)) / total));
}

void PrintJobs(const v1::ListJobsResponse& jobs) {
  std::cout << absl::StreamFormat("jobs reading on node %s (group %s)\n\n", jobs.node_id(),
                                  jobs.group());
  Table table({{"JOB"},
               {"DATASET"},
               {"FILES", Align::kRight},
               {"READ", Align::kRight},
               {"WAIT", Align::kRight},
               {"WAITED ON"},
               {"MEMORY", Align::kRight},
               {"PASSTHROUGH", Align::kRight},
               {"LOCAL", Align::kRight},
               {"PEER", Align::kRight},
               {"SOURCE", Align::kRight},
               {"ERRORS", Align::kRight},
               {"LAST READ", Align::kRight}});
  const int64_t now_ms = NowUnixMs();
  for (const v1::JobReads& job : jobs.jobs()) {
    uint64_t read = 0;
    uint64_t wait_ns = job.open_wait_ns();
    std::vector<std::string> by_origin;
    for (int origin = 0; origin < kReadOrigins; ++origin) {
      read += At(job.bytes(), origin);
      wait_ns += At(job.wait_ns(), origin);
      by_origin.push_back(FormatSize(At(job.bytes(), origin)));
    }
    table.AddRow(
        {job.job(), job.dataset().empty() ? "-" : job.dataset(), absl::StrCat(job.files_opened()),
         FormatSize(read), absl::StrFormat("%.3fs", wait_ns / 1e9), WaitMostlyOn(job), by_origin[0],
         by_origin[1], by_origin[2], by_origin[3], by_origin[4], absl::StrCat(job.errors()),
         absl::StrFormat("%.0fs ago", (now_ms - job.last_read_unix_ms()) / 1000.0)});
  }
  std::cout << table.Render();
  if (jobs.folded_jobs() > 0) {
    std::cout << absl::StreamFormat(
        "\n%d job and dataset pairs idle or beyond max_job_series are summed as 'other'\n",
        jobs.folded_jobs());
  }
}

absl::StatusOr<v1::ListJobsResponse> ListJobs(const ServerConnection& server) {
  std::unique_ptr<v1::Jobs::Stub> stub = v1::Jobs::NewStub(server.channel());
  v1::ListJobsResponse jobs;
  grpc::ClientContext context;
  GRANARY_RETURN_IF_ERROR(server.Check(stub->ListJobs(&context, v1::ListJobsRequest(), &jobs)));
  return jobs;
}

// Every node of the asked node's cache group, that node first; a member that
// cannot be asked is named on standard error and left out.
absl::StatusOr<std::vector<v1::ListJobsResponse>> ListGroupJobs(const GlobalOptions& global,
                                                                const ServerConnection& server) {
  GRANARY_ASSIGN_OR_RETURN(v1::ListJobsResponse own, ListJobs(server));
  GRANARY_ASSIGN_OR_RETURN(v1::GetMembersResponse members,
                           server.Call(&v1::Granary::Stub::GetMembers));
  std::vector<v1::ListJobsResponse> nodes = {own};
  for (const v1::MemberInfo& member : members.members()) {
    if (member.id() == members.self_id() || member.group() != own.group()) continue;
    absl::StatusOr<v1::ListJobsResponse> listed = [&]() -> absl::StatusOr<v1::ListJobsResponse> {
      GRANARY_ASSIGN_OR_RETURN(ServerConnection peer,
                               ServerConnection::Open(member.address(), global.token_file));
      return ListJobs(peer);
    }();
    if (!listed.ok()) {
      std::cerr << "granary: jobs of node " << member.id()
                << " left out: " << listed.status().message() << "\n";
      continue;
    }
    nodes.push_back(*std::move(listed));
  }
  return nodes;
}

absl::Status RunJobs(const GlobalOptions& global, const JobsOptions& options) {
  GRANARY_ASSIGN_OR_RETURN(ServerConnection server,
                           ServerConnection::Open(global.server, global.token_file));
  if (!options.group) {
    GRANARY_ASSIGN_OR_RETURN(v1::ListJobsResponse jobs, ListJobs(server));
    if (options.json) {
      PrintJson(JobsJson(jobs));
    } else {
      PrintJobs(jobs);
    }
    return absl::OkStatus();
  }
  GRANARY_ASSIGN_OR_RETURN(std::vector<v1::ListJobsResponse> nodes, ListGroupJobs(global, server));
  if (options.json) {
    nlohmann::json listed = nlohmann::json::array();
    for (const v1::ListJobsResponse& node : nodes) listed.push_back(JobsJson(node));
    PrintJson({{"nodes", std::move(listed)}});
    return absl::OkStatus();
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (i > 0) std::cout << "\n";
    PrintJobs(nodes[i]);
  }
  return absl::OkStatus();
}

}  // namespace

void AddJobsCommand(CLI::App& app, const GlobalOptions& global, Action& action) {
  auto options = std::make_shared<JobsOptions>();
  CLI::App* jobs = app.add_subcommand(
      "jobs", "Show each job reading on this node: its datasets, its wait and where it went");
  jobs->add_flag("--group", options->group,
                 "Every node of this node's cache group, each asked over TCP (with the cluster "
                 "token)");
  jobs->add_flag("--json", options->json,
                 "Print one JSON document (with --group: {\"nodes\": [one per node]})");
  jobs->callback([&global, &action, options] {
    action = [&global, options] { return RunJobs(global, *options); };
  });
}

}  // namespace granary::cli
