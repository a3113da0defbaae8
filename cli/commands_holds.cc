// granary holds: the datasets held in the cache for batch jobs that named
// them (cache_server/holds/), on every member: which holder holds which
// dataset version where, what it takes there, and how much of each node's
// hold share is taken.
#include <chrono>
#include <iostream>
#include <memory>
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
#include "proto/staging.grpc.pb.h"

namespace granary::cli {
namespace {

using Align = Table::Align;

constexpr std::chrono::seconds kTimeout{10};

void PrintHolds(const v1::ListHoldsResponse& response) {
  Table table({{"NODE"},
               {"GROUP"},
               {"HOLDER"},
               {"DATASET"},
               {"VERSION"},
               {"SIZE HERE", Align::kRight},
               {"LEASE LEFT", Align::kRight}});
  for (const v1::NodeHolds& node : response.nodes()) {
    for (const v1::Hold& hold : node.holds()) {
      table.AddRow({node.node_id(), node.group(), hold.holder(), hold.dataset(),
                    FormatVersion(hold.version()), FormatSize(hold.bytes()),
                    FormatDuration(static_cast<double>(hold.expires_in_ms()) / 1000)});
    }
  }
  std::cout << table.Render() << "\n";
  for (const v1::NodeHolds& node : response.nodes()) {
    if (!node.error().empty()) {
      std::cout << absl::StreamFormat("%s: not answered: %s\n", node.node_id(), node.error());
      continue;
    }
    std::cout << absl::StreamFormat("%s: holds take %s of its hold share, %s (%s)\n",
                                    node.node_id(), FormatSize(node.held_bytes()),
                                    FormatSize(node.share_bytes()),
                                    FormatPercent(Fraction(node.held_bytes(), node.share_bytes())));
  }
}

absl::Status RunHolds(const GlobalOptions& global, bool json) {
  GRANARY_ASSIGN_OR_RETURN(ServerConnection server,
                           ServerConnection::Open(global.server, global.token_file));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kTimeout);
  v1::ListHoldsResponse response;
  GRANARY_RETURN_IF_ERROR(
      server.Check(v1::Staging::NewStub(server.channel())
                       ->ListHolds(&context, v1::ListHoldsRequest(), &response)));
  if (json) {
    PrintJson(HoldsJson(response));
  } else {
    PrintHolds(response);
  }
  return absl::OkStatus();
}

}  // namespace

void AddHoldsCommand(CLI::App& app, const GlobalOptions& global, Action& action) {
  auto json = std::make_shared<bool>(false);
  CLI::App* holds = app.add_subcommand(
      "holds", "List the datasets held in the cache for pending and running jobs");
  holds->add_flag("--json", *json, "Print one JSON document");
  holds->callback(
      [&global, &action, json] { action = [&global, json] { return RunHolds(global, *json); }; });
}

}  // namespace granary::cli
