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
// on the hooks' two handler threads at once (scheduler_hooks/hook_main.cc).
// deploy/kubernetes/extender.yaml sizes the container's memory limit from
// these (deploy/README.md).
#include <string>
#include <string_view>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "scheduler_hooks/extender.h"
#include "scheduler_hooks/hook_main.h"

namespace {

struct Flags {
  granary::hooks::HookFlags hook{.listen = "127.0.0.1:8888", .max_body_bytes = 1 << 20};
  std::string prefix;
  double required_group_share = 0.5;
};

absl::Status Run(const Flags& flags) {
  return granary::hooks::RunHook(
      "granary-extender", flags.hook, {}, [&](granary::hooks::Hook& hook) -> absl::Status {
        granary::hooks::Extender extender(
            hook.locator(), {.required_group_share = flags.required_group_share,
                             .max_datasets_per_pod = flags.hook.max_datasets_per_pod});
        const std::string filter = absl::StrCat(flags.prefix, "/filter");
        const std::string prioritize = absl::StrCat(flags.prefix, "/prioritize");
        hook.http().Handle("POST", filter,
                           granary::hooks::JsonHandler(filter, [&extender](std::string_view body) {
                             return extender.Filter(body);
                           }));
        hook.http().Handle(
            "POST", prioritize,
            granary::hooks::JsonHandler(prioritize, [&extender](std::string_view body) {
              return extender.Prioritize(body);
            }));
        return hook.Serve(flags.hook.listen, absl::StrCat(filter, " and ", prioritize));
      });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("granary-extender: Kubernetes scheduler extender scoring nodes by dataset locality",
               "granary-extender");
  Flags flags;
  granary::hooks::AddHookFlags(
      app, flags.hook,
      {.listen = "HTTP address, HOST:PORT",
       .max_body_bytes =
           "Largest request body accepted (413 above). With nodeCacheCapable: true the "
           "scheduler sends node names: 5,000 nodes take about 80 kB. A request being "
           "handled takes up to about 15x its body in memory (deploy/README.md)",
       .max_datasets_per_pod =
           "Distinct datasets a pod's granary.io/datasets may name; more is refused"});
  app.add_option("--prefix", flags.prefix,
                 "URL path prefix of the verbs, e.g. /granary (the urlPrefix's path)");
  app.add_option("--required-group-share", flags.required_group_share,
                 "For pods with granary.io/locality: required, the share of their datasets a "
                 "node's cache group must hold")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  return granary::hooks::RunHookMain(app, argc, argv, "granary-extender", [&flags] {
    if (!flags.prefix.empty() && flags.prefix.front() != '/') flags.prefix.insert(0, "/");
    while (!flags.prefix.empty() && flags.prefix.back() == '/') flags.prefix.pop_back();
    return Run(flags);
  });
}
