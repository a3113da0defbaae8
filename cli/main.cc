// granary: the command-line client of granaryd. Parses the command line, runs
// the chosen command and turns its status into the exit status, with a
// one-line reason on standard error when it failed.
#include <cstdio>
#include <string>
#include <string_view>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/str_replace.h"
#include "cli/commands.h"
#include "common/base/absl_compat.h"

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
// As a shell reports a command killed by SIGINT.
constexpr int kExitInterrupted = 130;

// Errors must stay on one line even when a server's message does not.
void PrintError(std::string_view message) {
  std::string line = absl::StrReplaceAll(granary::AsAbsl(message), {{"\r", " "}, {"\n", " "}});
  std::fprintf(stderr, "granary: %s\n", line.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("granary: manage and read datasets cached by granaryd", "granary");
  app.require_subcommand(1);
  // Global options may also follow the command: `granary status --server X`.
  app.fallthrough();
  granary::cli::GlobalOptions global;
  app.add_option("--server", global.server,
                 "granaryd address, unix:PATH or HOST:PORT (default: $GRANARY_SERVER, else the "
                 "local socket)");
  app.add_option("--token-file", global.token_file,
                 "File holding the cluster token that TCP servers require (default: "
                 "$GRANARY_TOKEN_FILE, else none)");

  granary::cli::Action action;
  granary::cli::AddDatasetCommands(app, global, action);
  granary::cli::AddPrewarmCommand(app, global, action);
  granary::cli::AddClusterCommands(app, global, action);
  granary::cli::AddJobsCommand(app, global, action);
  granary::cli::AddCatCommand(app, global, action);
  granary::cli::AddHoldsCommand(app, global, action);
  granary::cli::AddStageInCommands(app, global, action);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForAllHelp& help) {
    return app.exit(help);
  } catch (const CLI::ParseError& error) {
    PrintError(std::string(error.what()) + " (see granary --help)");
    return kExitUsage;
  }

  absl::Status status = action();
  if (status.ok()) return 0;
  PrintError(granary::AsStd(status.message()));
  return status.code() == absl::StatusCode::kCancelled ? kExitInterrupted : kExitFailure;
}
