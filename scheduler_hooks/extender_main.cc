// granary-extender: the Kubernetes scheduler extender. Serves
//   POST <prefix>/filter      ExtenderArgs -> ExtenderFilterResult
//   POST <prefix>/prioritize  ExtenderArgs -> HostPriorityList
//   GET  /healthz             "ok"
// over HTTP, asking granaryd (--server) where the pods' datasets are. Runs until
// SIGINT or SIGTERM.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/absl_compat.h"
#include "common/cluster_token.h"
#include "common/http.h"
#include "common/logging.h"
#include "common/server_address.h"
#include "common/stop_signals.h"
#include "scheduler_hooks/extender.h"
#include "scheduler_hooks/grpc_locator.h"

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
// The scheduler waits for an extender up to its httpTimeout (30 s by default);
// a Locate answer takes milliseconds, so a slow server is treated as down.
constexpr std::chrono::milliseconds kLocateDeadline{2000};

struct Flags {
  std::string server;
  std::string listen = "127.0.0.1:8888";
  std::string prefix;
  std::string token_file;
  double required_group_share = 0.5;
};

granary::HttpServer::Handler Serve(
    absl::StatusOr<std::string> (granary::hooks::Extender::*verb)(std::string_view) const,
    const granary::hooks::Extender& extender) {
  return [verb, &extender](const granary::HttpRequest& request) {
    absl::StatusOr<std::string> reply = (extender.*verb)(request.body);
    if (!reply.ok()) {
      GRANARY_LOG(WARNING) << request.path << ": " << reply.status().message();
      return granary::HttpResponse{400, "text/plain; charset=utf-8",
                                   std::string(reply.status().message()) + "\n"};
    }
    return granary::HttpResponse{200, "application/json", *std::move(reply)};
  };
}

absl::Status Run(const Flags& flags) {
  absl::StatusOr<std::string> token = granary::ResolveClusterToken(flags.token_file);
  if (!token.ok()) return token.status();
  std::string server = granary::ResolveServerAddress(flags.server);
  absl::StatusOr<granary::hooks::Locator> locator =
      granary::hooks::MakeGrpcLocator(server, *token, kLocateDeadline);
  if (!locator.ok()) return locator.status();
  granary::hooks::Extender extender(*std::move(locator),
                                    {.required_group_share = flags.required_group_share});

  // Before the server's threads start, so that only Wait() below sees them.
  granary::StopSignals stop_signals;

  granary::HttpServer http;
  http.Handle("POST", flags.prefix + "/filter", Serve(&granary::hooks::Extender::Filter, extender));
  http.Handle("POST", flags.prefix + "/prioritize",
              Serve(&granary::hooks::Extender::Prioritize, extender));
  http.Handle("GET", "/healthz", [](const granary::HttpRequest&) {
    return granary::HttpResponse{200, "text/plain; charset=utf-8", "ok\n"};
  });
  if (absl::Status started = http.Start(flags.listen); !started.ok()) return started;
  GRANARY_LOG(INFO) << "granary-extender serving " << flags.prefix << "/filter and " << flags.prefix
                    << "/prioritize on port " << http.port() << ", locating datasets through "
                    << server;
  GRANARY_LOG(INFO) << "stopping on signal " << stop_signals.Wait();
  http.Stop();
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("granary-extender: Kubernetes scheduler extender scoring nodes by dataset locality",
               "granary-extender");
  Flags flags;
  app.add_option("--server", flags.server,
                 "granaryd address, unix:PATH or HOST:PORT (default: $GRANARY_SERVER, else the "
                 "local socket)");
  app.add_option("--listen", flags.listen, "HTTP address, HOST:PORT")->capture_default_str();
  app.add_option("--prefix", flags.prefix,
                 "URL path prefix of the verbs, e.g. /granary (the urlPrefix's path)");
  app.add_option("--token-file", flags.token_file,
                 "Cluster token file for TCP servers (default: $GRANARY_TOKEN_FILE)");
  app.add_option("--required-group-share", flags.required_group_share,
                 "For pods with granary.io/locality: required, the share of their datasets a "
                 "node's cache group must hold")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) return app.exit(error);
    std::fprintf(stderr, "granary-extender: %s (see granary-extender --help)\n", error.what());
    return kExitUsage;
  }
  if (!flags.prefix.empty() && flags.prefix.front() != '/') flags.prefix.insert(0, "/");
  while (!flags.prefix.empty() && flags.prefix.back() == '/') flags.prefix.pop_back();

  absl::Status status = Run(flags);
  if (status.ok()) return 0;
  std::fprintf(stderr, "granary-extender: %s\n", std::string(status.message()).c_str());
  return kExitFailure;
}
