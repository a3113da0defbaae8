// granary status and granary locate: what the cache nodes hold and how they do.
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_output.h"
#include "cli/server_connection.h"
#include "cli/table.h"
#include "common/base/size.h"
#include "common/base/status.h"
#include "common/dataset/chunk_key.h"

namespace granary::cli {
namespace {

using Align = Table::Align;

struct LocateOptions {
  std::string name;
  bool fresh = false;
  bool json = false;
};

std::string RatioText(std::optional<double> ratio) { return ratio ? FormatPercent(*ratio) : "-"; }

void PrintStatus(const v1::StatusResponse& status) {
  Table table({{"NODE"},
               {"GROUP"},
               {"STATE"},
               {"ADDRESS"},
               {"USED", Align::kRight},
               {"CAPACITY", Align::kRight},
               {"USE", Align::kRight},
               {"CHUNKS", Align::kRight},
               {"HIT RATIO", Align::kRight},
               {"FROM CACHE", Align::kRight},
               {"FROM SOURCE", Align::kRight},
               {"IO"}});
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t checksum_failures = 0;
  for (const v1::NodeStatus& node : status.nodes()) {
    hits += node.hits();
    misses += node.misses();
    checksum_failures += node.checksum_failures();
    table.AddRow({node.node_id(), node.group(), node.state(), node.address(),
                  FormatSize(node.used_bytes()), FormatSize(node.capacity_bytes()),
                  FormatPercent(Fraction(node.used_bytes(), node.capacity_bytes())),
                  absl::StrCat(node.chunk_count()), RatioText(HitRatio(node.hits(), node.misses())),
                  FormatSize(node.bytes_from_cache()), FormatSize(node.bytes_from_source()),
                  node.io_engine()});
  }
  std::cout << table.Render();
  std::cout << absl::StreamFormat(
      "\ndatasets: %d   hit ratio: %s (%d hits, %d misses)   checksum failures: %d\n",
      status.dataset_count(), RatioText(HitRatio(hits, misses)), hits, misses, checksum_failures);
  Table fills({{"NODE"}, {"FILLING"}, {"VERSION"}, {"FILLED", Align::kRight}, {"STATE"}});
  bool filling = false;
  for (const v1::NodeStatus& node : status.nodes()) {
    for (const v1::FillProgress& fill : node.fills()) {
      filling = true;
      fills.AddRow({node.node_id(), fill.name(), FormatVersion(fill.version()),
                    FormatSize(fill.progress().bytes_done()), FillText(fill)});
    }
  }
  if (filling) std::cout << "\nfills started by cold reads:\n" << fills.Render();
  for (const v1::NodeStatus& node : status.nodes()) {
    for (const v1::UnloadableDataset& dataset : node.unloadable_datasets()) {
      std::cout << absl::StreamFormat(
          "\nnode %s cannot load dataset '%s' version %s (mounts skip it): %s\n", node.node_id(),
          dataset.name(), FormatVersion(dataset.version()), dataset.error());
    }
  }
}

absl::Status RunStatus(const GlobalOptions& global, bool json) {
  GRANARY_ASSIGN_OR_RETURN(ServerConnection server,
                           ServerConnection::Open(global.server, global.token_file));
  GRANARY_ASSIGN_OR_RETURN(v1::StatusResponse status, server.Call(&v1::Granary::Stub::Status));
  if (json) {
    PrintJson(StatusJson(status));
  } else {
    PrintStatus(status);
  }
  return absl::OkStatus();
}

void PrintLocate(const v1::LocateResponse& locate) {
  std::cout << absl::StreamFormat("dataset '%s' version %s: %s, %d replica(s) per group\n\n",
                                  locate.name(), FormatVersion(locate.version()),
                                  FormatSize(locate.total_bytes()), locate.replicas());
  Table nodes({{"NODE"},
               {"GROUP"},
               {"CACHED", Align::kRight},
               {"ON NODE", Align::kRight},
               {"IN GROUP", Align::kRight},
               {"FILL"},
               {"AGE", Align::kRight}});
  for (const v1::NodeLocality& node : locate.nodes()) {
    nodes.AddRow({node.node_id(), node.group(), FormatSize(node.cached_bytes()),
                  FormatPercent(node.node_fraction()), FormatPercent(node.group_fraction()),
                  node.has_fill() ? FillText(node.fill()) : "-",
                  absl::StrFormat("%.1fs", node.age_ms() / 1000.0)});
  }
  std::cout << nodes.Render() << '\n';
  Table groups({{"GROUP"}, {"CACHED", Align::kRight}, {"FRACTION", Align::kRight}});
  for (const v1::GroupLocality& group : locate.groups()) {
    groups.AddRow(
        {group.group(), FormatSize(group.cached_bytes()), FormatPercent(group.fraction())});
  }
  std::cout << groups.Render();
}

absl::Status RunLocate(const GlobalOptions& global, const LocateOptions& options) {
  GRANARY_ASSIGN_OR_RETURN(ServerConnection server,
                           ServerConnection::Open(global.server, global.token_file));
  v1::LocateRequest request;
  request.set_name(options.name);
  request.set_fresh(options.fresh);
  GRANARY_ASSIGN_OR_RETURN(v1::LocateResponse locate,
                           server.Call(&v1::Granary::Stub::Locate, request));
  if (options.json) {
    PrintJson(LocateJson(locate));
  } else {
    PrintLocate(locate);
  }
  return absl::OkStatus();
}

}  // namespace

void AddClusterCommands(CLI::App& app, const GlobalOptions& global, Action& action) {
  auto status_json = std::make_shared<bool>(false);
  CLI::App* status =
      app.add_subcommand("status", "Show cache nodes: capacity, usage, hits and misses");
  status->add_flag("--json", *status_json, "Print one JSON document");
  status->callback([&global, &action, status_json] {
    action = [&global, status_json] { return RunStatus(global, *status_json); };
  });

  auto locate_options = std::make_shared<LocateOptions>();
  CLI::App* locate =
      app.add_subcommand("locate", "Show how much of a dataset each node and group holds");
  locate->add_option("NAME", locate_options->name, "Dataset name")->required();
  locate->add_flag("--fresh", locate_options->fresh,
                   "Ask every node now instead of reading what the nodes published (AGE says "
                   "how old each node's figures are)");
  locate->add_flag("--json", locate_options->json, "Print one JSON document");
  locate->callback([&global, &action, locate_options] {
    action = [&global, locate_options] { return RunLocate(global, *locate_options); };
  });
}

}  // namespace granary::cli
