#include "scheduler_hooks/hook_main.h"

#include <chrono>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/net/cluster_token.h"
#include "common/net/server_address.h"
#include "scheduler_hooks/grpc_locator.h"
#include "scheduler_hooks/locate_cache.h"

namespace granary::hooks {
namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
// The API server waits for a webhook up to its timeoutSeconds (5 in
// deploy/kubernetes/webhook.yaml), the scheduler for an extender up to its
// httpTimeout (30 s by default); a Locate answer takes milliseconds, so a
// slower server is treated as down well before either.
constexpr std::chrono::milliseconds kLocateDeadline{2000};
// Scheduling calls and pod creations come one at a time or in bursts (a
// job's pods); two threads answer a probe or a second caller while one call
// waits on granaryd, and bound the memory that parsing bodies takes.
constexpr size_t kHandlerThreads = 2;
// Distinct datasets whose answers are kept (a few KB each).
constexpr size_t kLocateCacheEntries = 4096;

}  // namespace

void AddHookFlags(CLI::App& app, HookFlags& flags, const HookFlagHelp& help) {
  app.add_option("--server", flags.server,
                 "granaryd address, unix:PATH or HOST:PORT (default: $GRANARY_SERVER, else the "
                 "local socket)");
  app.add_option("--listen", flags.listen, help.listen)->capture_default_str();
  app.add_option("--token-file", flags.token_file,
                 "Cluster token file for TCP servers (default: $GRANARY_TOKEN_FILE)");
  app.add_option("--max-body-bytes", flags.max_body_bytes, help.max_body_bytes)
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30))
      ->capture_default_str();
  app.add_option("--max-connections", flags.max_connections,
                 "Connections served at once; one more is refused")
      ->check(CLI::Range(size_t{4}, size_t{65536}))
      ->capture_default_str();
  app.add_option("--max-datasets-per-pod", flags.max_datasets_per_pod, help.max_datasets_per_pod)
      ->check(CLI::Range(size_t{1}, size_t{100000}))
      ->capture_default_str();
  app.add_option("--locate-cache-ms", flags.locate_cache_ms,
                 "How long a dataset's Locate answer is reused (0: ask granaryd every time)")
      ->check(CLI::Range(int64_t{0}, int64_t{600000}))
      ->capture_default_str();
}

int RunHookMain(CLI::App& app, int argc, char** argv, std::string_view name,
                const std::function<absl::Status()>& run) {
  const std::string program(name);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) return app.exit(error);
    std::fprintf(stderr, "%s: %s (see %s --help)\n", program.c_str(), error.what(),
                 program.c_str());
    return kExitUsage;
  }
  absl::Status status = run();
  if (status.ok()) return 0;
  std::fprintf(stderr, "%s: %s\n", program.c_str(), std::string(status.message()).c_str());
  return kExitFailure;
}

Hook::Hook(std::string_view name, std::string server, std::string token, Locator locator,
           HttpServerOptions http_options, StopSignals* stop_signals)
    : name_(name),
      server_(std::move(server)),
      token_(std::move(token)),
      locator_(std::move(locator)),
      http_(std::move(http_options)),
      stop_signals_(stop_signals) {}

absl::Status Hook::Serve(std::string_view listen, std::string_view what) {
  http_.Handle("GET", "/healthz", [](const HttpRequest&) {
    return HttpResponse{200, "text/plain; charset=utf-8", "ok\n"};
  });
  GRANARY_RETURN_IF_ERROR(http_.Start(listen));
  GRANARY_LOG(INFO) << name_ << " serving " << what << " on port " << http_.port()
                    << ", locating datasets through " << server_;
  GRANARY_LOG(INFO) << "stopping on signal " << stop_signals_->Wait();
  http_.Stop();
  return absl::OkStatus();
}

absl::Status RunHook(std::string_view name, const HookFlags& flags, HttpServerOptions http_options,
                     const std::function<absl::Status(Hook&)>& body) {
  // Before any thread starts (gRPC's, which the locator's channel starts, and
  // the server's), so that only Hook::Serve() sees them.
  StopSignals stop_signals;
  GRANARY_ASSIGN_OR_RETURN(std::string token, ResolveClusterToken(flags.token_file));
  std::string server = ResolveServerAddress(flags.server);
  GRANARY_ASSIGN_OR_RETURN(Locator locator, MakeGrpcLocator(server, token, kLocateDeadline));
  http_options.max_body_bytes = flags.max_body_bytes;
  http_options.max_buffered_body_bytes = 2 * flags.max_body_bytes;
  http_options.max_connections = flags.max_connections;
  http_options.handler_threads = kHandlerThreads;
  Hook hook(name, std::move(server), std::move(token),
            CachingLocator(std::move(locator), std::chrono::milliseconds(flags.locate_cache_ms),
                           kLocateCacheEntries),
            std::move(http_options), &stop_signals);
  return body(hook);
}

HttpServer::Handler JsonHandler(
    std::string refusal_label, std::function<absl::StatusOr<std::string>(std::string_view)> reply) {
  return [refusal_label = std::move(refusal_label),
          reply = std::move(reply)](const HttpRequest& request) {
    absl::StatusOr<std::string> body = reply(request.body);
    if (!body.ok()) {
      GRANARY_LOG(WARNING) << refusal_label << ": " << body.status().message();
      return HttpResponse{400, "text/plain; charset=utf-8",
                          absl::StrCat(body.status().message(), "\n")};
    }
    return HttpResponse{200, "application/json", *std::move(body)};
  };
}

}  // namespace granary::hooks
