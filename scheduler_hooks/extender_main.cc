// granary-extender: the Kubernetes scheduler extender. Serves
//   POST <prefix>/filter      ExtenderArgs -> ExtenderFilterResult
//   POST <prefix>/prioritize  ExtenderArgs -> HostPriorityList
//   GET  /healthz             "ok"
// over HTTP, asking granaryd (--server) where the pods' datasets are, and
// reusing its answers for --locate-cache-ms. Runs until SIGINT or SIGTERM.
//
// Memory: request bodies are buffered whole (at most --max-body-bytes each, and
// twice that for all connections together), and a request being handled takes
// up to about 15x its body (Filter builds a JSON tree of it; bench/RESULTS.md),
// on at most kHandlerThreads threads at once. deploy/kubernetes/extender.yaml
// sizes the container's memory limit from these (deploy/README.md).
#include <signal.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
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
#include "scheduler_hooks/locate_cache.h"

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
// The scheduler waits for an extender up to its httpTimeout (30 s by default);
// a Locate answer takes milliseconds, so a slow server is treated as down.
constexpr std::chrono::milliseconds kLocateDeadline{2000};
// kube-scheduler asks one extender call at a time per profile; two threads
// let a probe or a second scheduler be answered while one call waits on
// granaryd, and bound the memory that parsing bodies takes.
constexpr size_t kHandlerThreads = 2;
// Distinct datasets whose answers are kept (a few KB each).
constexpr size_t kLocateCacheEntries = 4096;

struct Flags {
  std::string server;
  std::string listen = "127.0.0.1:8888";
  std::string prefix;
  std::string token_file;
  double required_group_share = 0.5;
  size_t max_body_bytes = 1 << 20;
  size_t max_connections = 256;
  size_t max_datasets_per_pod = 64;
  int64_t locate_cache_ms = 2000;
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
  // Before any thread starts (gRPC's, which the locator's channel starts, and
  // the server's), so that only Wait() below sees them.
  granary::StopSignals stop_signals;
  absl::StatusOr<std::string> token = granary::ResolveClusterToken(flags.token_file);
  if (!token.ok()) return token.status();
  std::string server = granary::ResolveServerAddress(flags.server);
  absl::StatusOr<granary::hooks::Locator> locator =
      granary::hooks::MakeGrpcLocator(server, *token, kLocateDeadline);
  if (!locator.ok()) return locator.status();
  granary::hooks::Extender extender(
      granary::hooks::CachingLocator(*std::move(locator),
                                     std::chrono::milliseconds(flags.locate_cache_ms),
                                     kLocateCacheEntries),
      {.required_group_share = flags.required_group_share,
       .max_datasets_per_pod = flags.max_datasets_per_pod});

  granary::HttpServer http({.max_body_bytes = flags.max_body_bytes,
                            .max_buffered_body_bytes = 2 * flags.max_body_bytes,
                            .max_connections = flags.max_connections,
                            .handler_threads = kHandlerThreads});
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
  app.add_option("--max-body-bytes", flags.max_body_bytes,
                 "Largest request body accepted (413 above). With nodeCacheCapable: true the "
                 "scheduler sends node names: 5,000 nodes take about 80 kB. A request being "
                 "handled takes up to about 15x its body in memory (deploy/README.md)")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30))
      ->capture_default_str();
  app.add_option("--max-connections", flags.max_connections,
                 "Connections served at once; one more is answered 503")
      ->check(CLI::Range(size_t{4}, size_t{65536}))
      ->capture_default_str();
  app.add_option("--max-datasets-per-pod", flags.max_datasets_per_pod,
                 "Distinct datasets a pod's granary.io/datasets may name; more is refused")
      ->check(CLI::Range(size_t{1}, size_t{100000}))
      ->capture_default_str();
  app.add_option("--locate-cache-ms", flags.locate_cache_ms,
                 "How long a dataset's Locate answer is reused across scheduling decisions "
                 "(0: ask granaryd every time)")
      ->check(CLI::Range(int64_t{0}, int64_t{600000}))
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
