// granary stage-in: the stage-ins of batch jobs (proto/staging.proto), as the
// Slurm hooks drive them (scheduler_hooks/slurm/burst_buffer.lua) and as an
// administrator looks at them:
//
//   granary stage-in start JOB DATASETS     # the job is queued: follow it
//   granary stage-in top-up JOB --nodes N,...  # it has its nodes: fill them
//   granary stage-in end JOB                 # it was torn down
//   granary stage-in ls [--json]             # every stage-in, one row a target
//
// Each call has a deadline (--timeout-ms), so that a hook calling it never
// waits on a granaryd that does not answer.
#include <chrono>
#include <cstdint>
#include <ctime>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_output.h"
#include "cli/server_connection.h"
#include "cli/table.h"
#include "common/base/size.h"
#include "common/base/status.h"
#include "proto/staging.grpc.pb.h"

namespace granary::cli {
namespace {

using Align = Table::Align;

struct StageInOptions {
  std::string job_id;
  std::vector<std::string> datasets;
  std::vector<std::string> nodes;
  double max_wait_seconds = 60;
  double enough_share = 1;
  uint32_t timeout_ms = 5000;
  bool json = false;
};

// "2026-12-07 11:05:00" in local time, as Slurm shows times; "-" for unknown.
std::string StartText(int64_t unix_s) {
  if (unix_s <= 0) return "-";
  const time_t seconds = static_cast<time_t>(unix_s);
  std::tm parts{};
  ::localtime_r(&seconds, &parts);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &parts);
  return text;
}

nlohmann::json StageInJson(const v1::StageIn& stage_in) {
  nlohmann::json targets = nlohmann::json::array();
  for (const v1::StageInTarget& target : stage_in.targets()) {
    targets.push_back({{"dataset", target.dataset()},
                       {"group", target.group()},
                       {"bytes_cached", target.bytes_cached()},
                       {"bytes_total", target.bytes_total()},
                       {"share_cached", Fraction(target.bytes_cached(), target.bytes_total())},
                       {"state", target.state()},
                       {"error", target.error()}});
  }
  return {{"job_id", stage_in.job_id()},
          {"datasets",
           std::vector<std::string>(stage_in.datasets().begin(), stage_in.datasets().end())},
          {"state", stage_in.state()},
          {"partition", stage_in.partition()},
          {"nodes", std::vector<std::string>(stage_in.nodes().begin(), stage_in.nodes().end())},
          {"start_unix_s", stage_in.start_unix_s()},
          {"groups", std::vector<std::string>(stage_in.groups().begin(), stage_in.groups().end())},
          {"targets", std::move(targets)},
          {"note", stage_in.note()},
          {"hold", stage_in.hold()},
          {"created_unix_ms", stage_in.created_unix_ms()}};
}

void PrintStageIns(const std::vector<v1::StageIn>& stage_ins) {
  Table table({{"JOB"},
               {"STATE"},
               {"EXPECTED START"},
               {"DATASET"},
               {"GROUP"},
               {"CACHED", Align::kRight},
               {"OF", Align::kRight},
               {"SHARE", Align::kRight},
               {"STAGING"}});
  std::vector<std::string> notes;
  for (const v1::StageIn& stage_in : stage_ins) {
    if (stage_in.targets().empty()) {
      table.AddRow({stage_in.job_id(), stage_in.state(), StartText(stage_in.start_unix_s()),
                    absl::StrJoin(stage_in.datasets(), ","), "-", "-", "-", "-", "-"});
    }
    for (const v1::StageInTarget& target : stage_in.targets()) {
      table.AddRow({stage_in.job_id(), stage_in.state(), StartText(stage_in.start_unix_s()),
                    target.dataset(), target.group().empty() ? "-" : target.group(),
                    FormatSize(target.bytes_cached()), FormatSize(target.bytes_total()),
                    FormatPercent(Fraction(target.bytes_cached(), target.bytes_total())),
                    target.state()});
      if (!target.error().empty()) {
        notes.push_back(absl::StrCat("job ", stage_in.job_id(), ": ", target.dataset(),
                                     target.group().empty() ? "" : " in " + target.group(), ": ",
                                     target.error()));
      }
    }
    if (!stage_in.note().empty()) {
      notes.push_back(absl::StrCat("job ", stage_in.job_id(), ": ", stage_in.note()));
    }
    if (!stage_in.hold().empty() && stage_in.hold() != "held") {
      notes.push_back(absl::StrCat("job ", stage_in.job_id(), ": hold ", stage_in.hold()));
    }
  }
  std::cout << table.Render();
  for (const std::string& note : notes) std::cout << note << "\n";
}

// One unary Staging call with the options' deadline.
template <typename Request, typename Response>
absl::StatusOr<Response> CallStaging(const GlobalOptions& global, const StageInOptions& options,
                                     grpc::Status (v1::Staging::Stub::*method)(grpc::ClientContext*,
                                                                               const Request&,
                                                                               Response*),
                                     const Request& request) {
  GRANARY_ASSIGN_OR_RETURN(ServerConnection server,
                           ServerConnection::Open(global.server, global.token_file));
  std::unique_ptr<v1::Staging::Stub> stub = v1::Staging::NewStub(server.channel());
  grpc::ClientContext context;
  if (options.timeout_ms > 0) {
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(options.timeout_ms));
  }
  Response response;
  GRANARY_RETURN_IF_ERROR(server.Check((stub.get()->*method)(&context, request, &response)));
  return response;
}

absl::Status PrintOne(const absl::StatusOr<v1::StageIn>& stage_in, bool json) {
  if (!stage_in.ok()) return stage_in.status();
  if (json) {
    PrintJson(StageInJson(*stage_in));
  } else {
    PrintStageIns({*stage_in});
  }
  return absl::OkStatus();
}

absl::Status RunStart(const GlobalOptions& global, const StageInOptions& options) {
  v1::StartStageInRequest request;
  request.set_job_id(options.job_id);
  for (const std::string& dataset : options.datasets) request.add_datasets(dataset);
  return PrintOne(CallStaging(global, options, &v1::Staging::Stub::StartStageIn, request),
                  options.json);
}

absl::Status RunTopUp(const GlobalOptions& global, StageInOptions options) {
  if (!(options.max_wait_seconds > 0 && options.max_wait_seconds <= 3600)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-wait ", options.max_wait_seconds, " is not in (0, 3600] seconds"));
  }
  if (!(options.enough_share > 0 && options.enough_share <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--enough ", options.enough_share, " is not in (0, 1]"));
  }
  v1::TopUpStageInRequest request;
  request.set_job_id(options.job_id);
  for (const std::string& dataset : options.datasets) request.add_datasets(dataset);
  for (const std::string& node : options.nodes) request.add_nodes(node);
  request.set_max_wait_ms(static_cast<uint32_t>(options.max_wait_seconds * 1000));
  request.set_enough_share(options.enough_share);
  // The server stops at max_wait itself; the deadline only covers a server
  // that does not answer at all.
  options.timeout_ms = request.max_wait_ms() + options.timeout_ms;
  return PrintOne(CallStaging(global, options, &v1::Staging::Stub::TopUpStageIn, request),
                  options.json);
}

absl::Status RunEnd(const GlobalOptions& global, const StageInOptions& options) {
  v1::EndStageInRequest request;
  request.set_job_id(options.job_id);
  return PrintOne(CallStaging(global, options, &v1::Staging::Stub::EndStageIn, request),
                  options.json);
}

absl::Status RunList(const GlobalOptions& global, const StageInOptions& options) {
  GRANARY_ASSIGN_OR_RETURN(
      v1::ListStageInsResponse listed,
      CallStaging(global, options, &v1::Staging::Stub::ListStageIns, v1::ListStageInsRequest()));
  std::vector<v1::StageIn> stage_ins(listed.stage_ins().begin(), listed.stage_ins().end());
  if (options.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const v1::StageIn& stage_in : stage_ins) list.push_back(StageInJson(stage_in));
    PrintJson({{"stage_ins", std::move(list)}});
  } else {
    PrintStageIns(stage_ins);
  }
  return absl::OkStatus();
}

}  // namespace

void AddStageInCommands(CLI::App& app, const GlobalOptions& global, Action& action) {
  CLI::App* stage_in = app.add_subcommand(
      "stage-in", "Stage-ins of batch jobs: the cache filled while they wait in the queue");
  stage_in->require_subcommand(1);
  auto options = std::make_shared<StageInOptions>();
  auto common = [&options](CLI::App* command) {
    command->add_option("--timeout-ms", options->timeout_ms,
                        "Give up on granaryd after this long (default 5000; 0: never)");
    command->add_flag("--json", options->json, "Print one JSON document");
  };

  CLI::App* start = stage_in->add_subcommand(
      "start", "Follow a queued job's forecast and prewarm its datasets where it will run");
  start->add_option("JOB", options->job_id, "Slurm job id")->required();
  start->add_option("DATASETS", options->datasets, "Dataset names (comma-separated)")
      ->required()
      ->delimiter(',');
  common(start);
  start->callback([&global, &action, options] {
    action = [&global, options] { return RunStart(global, *options); };
  });

  CLI::App* top_up = stage_in->add_subcommand(
      "top-up", "Prewarm what a job's nodes lack, holding the job at most --max-wait");
  top_up->add_option("JOB", options->job_id, "Slurm job id")->required();
  top_up->add_option("--nodes", options->nodes, "The job's nodes (comma-separated)")
      ->required()
      ->delimiter(',');
  top_up
      ->add_option("--datasets", options->datasets,
                   "The job's datasets, for a granaryd that does not follow it yet")
      ->delimiter(',');
  top_up->add_option("--max-wait", options->max_wait_seconds,
                     "Seconds the job may be held (default 60)");
  top_up->add_option("--enough", options->enough_share,
                     "Share of each dataset cached in the nodes' groups that is enough "
                     "(default 1)");
  common(top_up);
  top_up->callback([&global, &action, options] {
    action = [&global, options] { return RunTopUp(global, *options); };
  });

  CLI::App* end = stage_in->add_subcommand("end", "End a job's stage-in (its teardown)");
  end->add_option("JOB", options->job_id, "Slurm job id")->required();
  common(end);
  end->callback([&global, &action, options] {
    action = [&global, options] { return RunEnd(global, *options); };
  });

  CLI::App* list = stage_in->add_subcommand("ls", "List stage-ins, one row per dataset and group");
  common(list);
  list->callback([&global, &action, options] {
    action = [&global, options] { return RunList(global, *options); };
  });
}

}  // namespace granary::cli
