// The granary subcommands. Each Add*Commands function registers its commands
// on the CLI11 app; when one is chosen on the command line, its parse callback
// binds the parsed options into `action`, which main runs once parsing has
// succeeded. Commands return an error status instead of printing it, so that
// main alone decides the one-line message and the exit status.
//
// Thread-safety: main-thread only.
#ifndef GRANARY_CLI_COMMANDS_H_
#define GRANARY_CLI_COMMANDS_H_

#include <functional>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"

namespace granary::cli {

// Options that precede the command and apply to all of them.
struct GlobalOptions {
  std::string server;      // --server ADDR; empty: $GRANARY_SERVER, else local.
  std::string token_file;  // --token-file FILE; empty: $GRANARY_TOKEN_FILE, else none.
};

using Action = std::function<absl::Status()>;

// dataset add|ls|show|refresh|rm
void AddDatasetCommands(CLI::App& app, const GlobalOptions& global, Action& action);
// prewarm
void AddPrewarmCommand(CLI::App& app, const GlobalOptions& global, Action& action);
// status, locate
void AddClusterCommands(CLI::App& app, const GlobalOptions& global, Action& action);
// jobs
void AddJobsCommand(CLI::App& app, const GlobalOptions& global, Action& action);
// cat
void AddCatCommand(CLI::App& app, const GlobalOptions& global, Action& action);
// holds
void AddHoldsCommand(CLI::App& app, const GlobalOptions& global, Action& action);
// stage-in start|top-up|end|ls
void AddStageInCommands(CLI::App& app, const GlobalOptions& global, Action& action);

}  // namespace granary::cli

#endif  // GRANARY_CLI_COMMANDS_H_
