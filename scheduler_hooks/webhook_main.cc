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
// takes a JSON tree of its body), on the hooks' two handler threads
// (scheduler_hooks/hook_main.cc).
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "common/base/status.h"
#include "common/net/http.h"
#include "common/net/server_address.h"
#include "common/scheduling/prewarm_queue.h"
#include "scheduler_hooks/admission_webhook.h"
#include "scheduler_hooks/hook_main.h"

namespace {

struct Flags {
  granary::hooks::HookFlags hook{.listen = "0.0.0.0:8443",
                                 // The API server's own limit on a request body
                                 // (3 MiB): no pod it accepts makes a larger review.
                                 .max_body_bytes = 3 << 20};
  std::string tls_cert_file;
  std::string tls_key_file;
  size_t prewarm_groups = 1;
};

absl::Status Run(const Flags& flags) {
  return granary::hooks::RunHook(
      "granary-webhook", flags.hook,
      {.tls_certificate_file = flags.tls_cert_file, .tls_key_file = flags.tls_key_file},
      [&](granary::hooks::Hook& hook) -> absl::Status {
        GRANARY_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                                 granary::MakeChannel(hook.server(), hook.token()));
        granary::PrewarmQueue prewarms(channel, "for an admitted pod");
        granary::hooks::AdmissionWebhook webhook(
            hook.locator(),
            [&prewarms](const std::string& dataset, const std::string& group) {
              prewarms.Warm(dataset, group);
            },
            {.max_datasets_per_pod = flags.hook.max_datasets_per_pod,
             .prewarm_groups = flags.prewarm_groups});
        hook.http().Handle(
            "POST", "/mutate",
            granary::hooks::JsonHandler("review refused", [&webhook](std::string_view body) {
              return webhook.Review(body);
            }));
        return hook.Serve(flags.hook.listen, "/mutate over HTTPS");
      });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "granary-webhook: Kubernetes admission webhook giving pods node affinity towards their "
      "cached datasets",
      "granary-webhook");
  Flags flags;
  granary::hooks::AddHookFlags(
      app, flags.hook,
      {.listen = "HTTPS address, HOST:PORT",
       .max_body_bytes = "Largest review accepted (413 above); the API server sends at most 3 MiB",
       .max_datasets_per_pod =
           "Distinct datasets a pod may name; a pod naming more is admitted unchanged"});
  app.add_option("--tls-cert-file", flags.tls_cert_file,
                 "PEM certificate chain the API server checks against the webhook "
                 "configuration's caBundle")
      ->required();
  app.add_option("--tls-key-file", flags.tls_key_file, "PEM private key of the certificate")
      ->required();
  app.add_option("--prewarm-groups", flags.prewarm_groups,
                 "How many of the cache groups a pod prefers are prewarmed when it is admitted "
                 "(0: none)")
      ->check(CLI::Range(size_t{0}, size_t{1000}))
      ->capture_default_str();
  return granary::hooks::RunHookMain(app, argc, argv, "granary-webhook",
                                     [&flags] { return Run(flags); });
}
