// granary jobs: what each job read on this node, how long its readers
// waited, and where their bytes came from; a job's receipt once it ended
// (--receipt), and ending a job (granary jobs end, for the scheduler's hooks).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_output.h"
#include "cli/server_connection.h"
#include "cli/table.h"
#include "common/base/absl_compat.h"
#include "common/base/size.h"
#include "common/base/status.h"
#include "common/base/wall_clock.h"
#include "common/dataset/chunk_key.h"
#include "common/jobs/read_origin.h"
#include "common/reports/job_reads_json.h"
#include "grpcpp/client_context.h"
#include "proto/jobs.grpc.pb.h"

namespace granary::cli {
namespace {

using Align = Table::Align;

struct JobsOptions {
  bool group = false;
  bool json = false;
  std::string receipt;
};

struct EndOptions {
  std::string job;
  int64_t started_unix_ms = 0;
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

// A row's figures: bytes read, the whole wait, and the bytes by origin.
struct RowFigures {
  uint64_t read = 0;
  uint64_t wait_ns = 0;
  std::vector<std::string> by_origin;
};

RowFigures FiguresOf(const v1::JobReads& reads) {
  RowFigures figures;
  figures.wait_ns = reads.open_wait_ns();
  for (int origin = 0; origin < kReadOrigins; ++origin) {
    figures.read += At(reads.bytes(), origin);
    figures.wait_ns += At(reads.wait_ns(), origin);
    figures.by_origin.push_back(FormatSize(At(reads.bytes(), origin)));
  }
  return figures;
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
    const RowFigures figures = FiguresOf(job);
    const std::vector<std::string>& by_origin = figures.by_origin;
    table.AddRow({job.job(), job.dataset().empty() ? "-" : job.dataset(),
                  absl::StrCat(job.files_opened()), FormatSize(figures.read),
                  absl::StrFormat("%.3fs", figures.wait_ns / 1e9), WaitMostlyOn(job), by_origin[0],
                  by_origin[1], by_origin[2], by_origin[3], by_origin[4],
                  absl::StrCat(job.errors()),
                  absl::StrFormat("%.0fs ago", (now_ms - job.last_read_unix_ms()) / 1000.0)});
  }
  std::cout << table.Render();
  if (jobs.folded_jobs() > 0) {
    std::cout << absl::StreamFormat(
        "\n%d job and dataset pairs idle or beyond max_job_series are summed as 'other'\n",
        jobs.folded_jobs());
  }
}

// When, or "-" for a time not known.
std::string TimeOrDash(int64_t unix_ms) { return unix_ms > 0 ? FormatUnixMs(unix_ms) : "-"; }

void PrintReceipt(const v1::JobReceipt& receipt) {
  std::cout << absl::StreamFormat("receipt of job %s on node %s (group %s)\n", receipt.job(),
                                  receipt.node_id(), receipt.group());
  std::cout << absl::StreamFormat("started %s, ended %s\n", TimeOrDash(receipt.started_unix_ms()),
                                  TimeOrDash(receipt.ended_unix_ms()));
  std::vector<std::string> readers;
  for (uint32_t uid : receipt.reader_uids()) readers.push_back(absl::StrCat(uid));
  std::cout << "read by uids " << (readers.empty() ? "-" : absl::StrJoin(readers, ", ")) << "\n\n";
  Table table({{"DATASET"},
               {"VERSION"},
               {"FILES", Align::kRight},
               {"READ", Align::kRight},
               {"WAIT", Align::kRight},
               {"MEMORY", Align::kRight},
               {"PASSTHROUGH", Align::kRight},
               {"LOCAL", Align::kRight},
               {"PEER", Align::kRight},
               {"SOURCE", Align::kRight},
               {"ERRORS", Align::kRight}});
  for (const v1::JobReads& version : receipt.reads()) {
    const RowFigures figures = FiguresOf(version);
    const std::vector<std::string>& by_origin = figures.by_origin;
    table.AddRow({version.dataset(), FormatVersion(version.version()),
                  absl::StrCat(version.files_opened()), FormatSize(figures.read),
                  absl::StrFormat("%.3fs", figures.wait_ns / 1e9), by_origin[0], by_origin[1],
                  by_origin[2], by_origin[3], by_origin[4], absl::StrCat(version.errors())});
  }
  std::cout << table.Render();
}

absl::Status RunReceipt(const GlobalOptions& global, const JobsOptions& options) {
  GRANARY_ASSIGN_OR_RETURN(ServerConnection server,
                           ServerConnection::Open(global.server, global.token_file));
  std::unique_ptr<v1::Jobs::Stub> stub = v1::Jobs::NewStub(server.channel());
  v1::GetReceiptRequest request;
  request.set_job(options.receipt);
  v1::JobReceipt receipt;
  grpc::ClientContext context;
  GRANARY_RETURN_IF_ERROR(server.Check(stub->GetReceipt(&context, request, &receipt)));
  if (options.json) {
    PrintJson(JobReceiptJson(receipt));
  } else {
    PrintReceipt(receipt);
  }
  return absl::OkStatus();
}

absl::Status RunEnd(const GlobalOptions& global, const EndOptions& options) {
  GRANARY_ASSIGN_OR_RETURN(ServerConnection server,
                           ServerConnection::Open(global.server, global.token_file));
  std::unique_ptr<v1::Jobs::Stub> stub = v1::Jobs::NewStub(server.channel());
  v1::EndJobRequest request;
  request.set_job(options.job);
  request.set_started_unix_ms(options.started_unix_ms);
  v1::EndJobResponse ended;
  grpc::ClientContext context;
  GRANARY_RETURN_IF_ERROR(server.Check(stub->EndJob(&context, request, &ended)));
  if (options.json) {
    nlohmann::json document = {{"receipt", JobReceiptJson(ended.receipt())}};
    document["path"] = ended.path().empty() ? nlohmann::json() : nlohmann::json(ended.path());
    PrintJson(document);
  } else if (ended.receipt().reads().empty()) {
    std::cout << absl::StreamFormat("job %s read nothing on node %s: no receipt\n", options.job,
                                    ended.receipt().node_id());
  } else {
    std::cout << absl::StreamFormat(
        "job %s ended on node %s: receipt of %d dataset versions%s\n", options.job,
        ended.receipt().node_id(), ended.receipt().reads_size(),
        ended.path().empty() ? "" : absl::StrCat(", written to ", ended.path()));
  }
  return absl::OkStatus();
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
  if (!options.receipt.empty()) return RunReceipt(global, options);
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
  jobs->add_option("--receipt", options->receipt,
                   "The receipt of a job that ended on this node (slurm:ID, pod:UID, uid:N): "
                   "the dataset versions it read, and what it read of each")
      ->excludes("--group");

  auto end_options = std::make_shared<EndOptions>();
  CLI::App* end = jobs->add_subcommand(
      "end", "End a job on this node and keep its receipt (the scheduler's hooks call it)");
  end->add_option("JOB", end_options->job, "The job: slurm:ID, pod:UID or uid:N")->required();
  end->add_option("--started-unix-ms", end_options->started_unix_ms,
                  "When the job started (default: its first read on this node)");
  end->add_flag("--json", end_options->json, "Print one JSON document");
  end->callback([&global, &action, end_options] {
    action = [&global, end_options] { return RunEnd(global, *end_options); };
  });
  jobs->callback([&global, &action, options, end] {
    if (end->parsed()) return;
    action = [&global, options] { return RunJobs(global, *options); };
  });
}

}  // namespace granary::cli
