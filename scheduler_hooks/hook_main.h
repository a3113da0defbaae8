// What granary-extender and granary-webhook share around their own handlers:
// the flags that say where granaryd is, how long its Locate answers are
// reused and how the HTTP server is bounded, and a run from start to stop:
// stop signals blocked before any thread starts, granaryd's address and
// token resolved, a caching Locate client made, /healthz served, and the
// server stopped on SIGINT or SIGTERM. Each binary adds its own flags and
// handlers.
//
// Thread-safety: for main(), on its thread.
#ifndef GRANARY_SCHEDULER_HOOKS_HOOK_MAIN_H_
#define GRANARY_SCHEDULER_HOOKS_HOOK_MAIN_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/base/stop_signals.h"
#include "common/net/http.h"
#include "scheduler_hooks/locator.h"

namespace granary::hooks {

// `listen` and `max_body_bytes` have no common default: each binary sets its
// own before AddHookFlags().
struct HookFlags {
  std::string server = {};
  std::string listen;
  std::string token_file = {};
  size_t max_body_bytes = 0;
  size_t max_connections = 256;
  size_t max_datasets_per_pod = 64;
  int64_t locate_cache_ms = 2000;
};

// What the flags whose meaning differs between the hooks mean in this one.
struct HookFlagHelp {
  std::string listen;
  std::string max_body_bytes;
  std::string max_datasets_per_pod;
};

void AddHookFlags(CLI::App& app, HookFlags& flags, const HookFlagHelp& help);

// Parses the command line and runs `run`: the exit code of main(). A usage
// error is printed with a pointer to --help (exit 2), a failed run with its
// message (exit 1); both start with `name`.
int RunHookMain(CLI::App& app, int argc, char** argv, std::string_view name,
                const std::function<absl::Status()>& run);

// A hook's run, given to its body by RunHook().
class Hook {
 public:
  Hook(std::string_view name, std::string server, std::string token, Locator locator,
       HttpServerOptions http_options, StopSignals* stop_signals);

  const std::string& server() const { return server_; }
  const std::string& token() const { return token_; }
  // granaryd's Locate answers, each reused for --locate-cache-ms.
  const Locator& locator() const { return locator_; }
  // Add the hook's handlers here before Serve().
  HttpServer& http() { return http_; }

  // Serves on `listen` with /healthz added, logs that it serves `what`, and
  // returns once a stop signal came and the server stopped.
  absl::Status Serve(std::string_view listen, std::string_view what);

 private:
  const std::string name_;
  const std::string server_;
  const std::string token_;
  Locator locator_;
  HttpServer http_;
  StopSignals* const stop_signals_;
};

// Resolves granaryd and makes the Locate client as `flags` say, then calls
// `body`, which adds its handlers and calls Serve(); what lives on its stack
// lives as long as the server. `http_options` are completed from `flags`
// (body and connection limits) and the handler thread count.
absl::Status RunHook(std::string_view name, const HookFlags& flags, HttpServerOptions http_options,
                     const std::function<absl::Status(Hook&)>& body);

// A handler for a POST whose body `reply` turns into JSON: 200 with it, or
// 400 with the error's message, logged as a warning after `refusal_label`.
HttpServer::Handler JsonHandler(std::string refusal_label,
                                std::function<absl::StatusOr<std::string>(std::string_view)> reply);

}  // namespace granary::hooks

#endif  // GRANARY_SCHEDULER_HOOKS_HOOK_MAIN_H_
