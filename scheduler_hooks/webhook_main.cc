// granary-webhook: the Kubernetes mutating admission webhook
// (scheduler_hooks/admission_webhook.h). Serves
//   POST /mutate   AdmissionReview -> AdmissionReview
//   GET  /healthz  "ok"
// over HTTPS only (the API server calls webhooks over TLS; the certificate
// and key come from a Secret, deploy/kubernetes/webhook.yaml), asking granaryd
// (--server) where the pods' datasets are, reusing its answers for
// --locate-cache-ms, and asking it to prewarm the groups a pod prefers.
// Runs until SIGINT or SIGTERM.
//
// Memory: as granary-extender's (request bodies buffered whole, at most
// --max-body-bytes each and twice that together, and a review being handled
// takes a JSON tree of its body), on at most kHandlerThreads threads.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "common/cluster_token.h"
#include "common/http.h"
#include "common/logging.h"
#include "common/prewarm_queue.h"
#include "common/server_address.h"
#include "common/status.h"
#include "common/stop_signals.h"
#include "scheduler_hooks/admission_webhook.h"
#include "scheduler_hooks/grpc_locator.h"
#include "scheduler_hooks/locate_cache.h"

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
// The API server waits for a webhook up to its timeoutSeconds (5 in
// deploy/kubernetes/webhook.yaml) and then admits the pod without it; a
// Locate answer takes milliseconds, so a slower server is treated as down
// well before that.
constexpr std::chrono::milliseconds kLocateDeadline{2000};
// Pod creations come in bursts (a job's pods); two threads answer a probe
// while one review waits on granaryd, and bound the memory bodies take.
constexpr size_t kHandlerThreads = 2;
constexpr size_t kLocateCacheEntries = 4096;

struct Flags {
  std::string server;
  std::string listen = "0.0.0.0:8443";
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string token_file;
  // The API server's own limit on a request body (3 MiB): no pod it accepts
  // makes a larger review.
  size_t max_body_bytes = 3 << 20;
  size_t max_connections = 256;
  size_t max_datasets_per_pod = 64;
  size_t prewarm_groups = 1;
  int64_t locate_cache_ms = 2000;
};

absl::Status Run(const Flags& flags) {
  // Before any thread starts (gRPC's and the server's), so that only Wait()
  // below sees them.
  granary::StopSignals stop_signals;
  GRANARY_ASSIGN_OR_RETURN(std::string token, granary::ResolveClusterToken(flags.token_file));
  std::string server = granary::ResolveServerAddress(flags.server);
  GRANARY_ASSIGN_OR_RETURN(granary::hooks::Locator locator,
                           granary::hooks::MakeGrpcLocator(server, token, kLocateDeadline));
  GRANARY_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                           granary::MakeChannel(server, token));
  granary::PrewarmQueue prewarms(channel, "for an admitted pod");
  granary::hooks::AdmissionWebhook webhook(
      granary::hooks::CachingLocator(std::move(locator),
                                     std::chrono::milliseconds(flags.locate_cache_ms),
                                     kLocateCacheEntries),
      [&prewarms](const std::string& dataset, const std::string& group) {
        prewarms.Warm(dataset, group);
      },
      {.max_datasets_per_pod = flags.max_datasets_per_pod, .prewarm_groups = flags.prewarm_groups});

  granary::HttpServer https({.max_body_bytes = flags.max_body_bytes,
                             .max_buffered_body_bytes = 2 * flags.max_body_bytes,
                             .max_connections = flags.max_connections,
                             .handler_threads = kHandlerThreads,
                             .tls_certificate_file = flags.tls_cert_file,
                             .tls_key_file = flags.tls_key_file});
  https.Handle("POST", "/mutate", [&webhook](const granary::HttpRequest& request) {
    absl::StatusOr<std::string> reply = webhook.Review(request.body);
    if (!reply.ok()) {
      GRANARY_LOG(WARNING) << "review refused: " << reply.status().message();
      return granary::HttpResponse{400, "text/plain; charset=utf-8",
                                   std::string(reply.status().message()) + "\n"};
    }
    return granary::HttpResponse{200, "application/json", *std::move(reply)};
  });
  https.Handle("GET", "/healthz", [](const granary::HttpRequest&) {
    return granary::HttpResponse{200, "text/plain; charset=utf-8", "ok\n"};
  });
  GRANARY_RETURN_IF_ERROR(https.Start(flags.listen));
  GRANARY_LOG(INFO) << "granary-webhook serving /mutate over HTTPS on port " << https.port()
                    << ", locating datasets through " << server;
  GRANARY_LOG(INFO) << "stopping on signal " << stop_signals.Wait();
  https.Stop();
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "granary-webhook: Kubernetes admission webhook giving pods node affinity towards their "
      "cached datasets",
      "granary-webhook");
  Flags flags;
  app.add_option("--server", flags.server,
                 "granaryd address, unix:PATH or HOST:PORT (default: $GRANARY_SERVER, else the "
                 "local socket)");
  app.add_option("--listen", flags.listen, "HTTPS address, HOST:PORT")->capture_default_str();
  app.add_option("--tls-cert-file", flags.tls_cert_file,
                 "PEM certificate chain the API server checks against the webhook "
                 "configuration's caBundle")
      ->required();
  app.add_option("--tls-key-file", flags.tls_key_file, "PEM private key of the certificate")
      ->required();
  app.add_option("--token-file", flags.token_file,
                 "Cluster token file for TCP servers (default: $GRANARY_TOKEN_FILE)");
  app.add_option("--max-body-bytes", flags.max_body_bytes,
                 "Largest review accepted (413 above); the API server sends at most 3 MiB")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30))
      ->capture_default_str();
  app.add_option("--max-connections", flags.max_connections,
                 "Connections served at once; one more is closed")
      ->check(CLI::Range(size_t{4}, size_t{65536}))
      ->capture_default_str();
  app.add_option("--max-datasets-per-pod", flags.max_datasets_per_pod,
                 "Distinct datasets a pod may name; a pod naming more is admitted unchanged")
      ->check(CLI::Range(size_t{1}, size_t{100000}))
      ->capture_default_str();
  app.add_option("--prewarm-groups", flags.prewarm_groups,
                 "How many of the cache groups a pod prefers are prewarmed when it is admitted "
                 "(0: none)")
      ->check(CLI::Range(size_t{0}, size_t{1000}))
      ->capture_default_str();
  app.add_option("--locate-cache-ms", flags.locate_cache_ms,
                 "How long a dataset's Locate answer is reused across reviews (0: ask granaryd "
                 "every time)")
      ->check(CLI::Range(int64_t{0}, int64_t{600000}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) return app.exit(error);
    std::fprintf(stderr, "granary-webhook: %s (see granary-webhook --help)\n", error.what());
    return kExitUsage;
  }
  absl::Status status = Run(flags);
  if (status.ok()) return 0;
  std::fprintf(stderr, "granary-webhook: %s\n", std::string(status.message()).c_str());
  return kExitFailure;
}
