// granaryd: the Granary cache server of one node. With no arguments it runs a
// working single-node cache with the embedded defaults (common/net/defaults.h);
// a YAML config file and flags override them, flags last:
//
//   granaryd [--config FILE] [--data-dir DIR] [--capacity SIZE] [--listen HOST:PORT]
//            [--socket PATH] [--node-id ID] [--group NAME] [--members FILE | --etcd URL]
//            [--advertise HOST:PORT] [--token-file FILE] [--insecure-tcp]
//            [--metrics-listen HOST:PORT] [--cache-dir DIR]... [--source-root DIR]...
//            [--admin-group GROUP] [--source-journal FILE]
//
// With no cluster configured and no --listen there is no TCP listener; a TCP
// listener needs a cluster token (--token-file) unless --insecure-tcp is given,
// which it then warns about on every start.
//
// SIGTERM or SIGINT shut it down cleanly. Exit status 0 after a clean
// shutdown, 2 for bad flags or configuration, 1 when the server cannot start.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "cache_server/config/config.h"
#include "cache_server/server.h"
#include "common/base/heap_buffers.h"
#include "common/base/logging.h"
#include "common/base/stop_signals.h"
#include "common/net/cluster_token.h"
#include "common/net/defaults.h"

namespace granary {
namespace {

struct Flags {
  std::string config_file;
  std::optional<std::string> data_dir, capacity, listen, socket, node_id, group, members, etcd,
      advertise, token_file, metrics_listen, admin_group, fill, source_journal;
  std::vector<std::string> cache_dirs, source_roots, s3_endpoints, s3_endpoint_profiles;
  std::optional<uint32_t> version_grace_seconds, s3_connect_timeout_ms, s3_request_timeout_ms,
      locality_period_ms, locality_max_age_seconds, manifest_memory_mib;
  bool insecure_tcp = false;
};

void Fail(int exit_code, absl::string_view reason) {
  std::fprintf(stderr, "granaryd: %.*s\n", static_cast<int>(reason.size()), reason.data());
  std::exit(exit_code);
}

// Defaults, then the config file, then flags.
absl::StatusOr<GranarydConfig> BuildConfig(const Flags& flags) {
  GranarydConfig config = DefaultGranarydConfig();
  if (!flags.config_file.empty()) {
    absl::Status applied = ApplyConfigFile(flags.config_file, &config);
    if (!applied.ok()) return applied;
  }
  if (flags.data_dir) config.data_dir = *flags.data_dir;
  if (flags.capacity) {
    absl::StatusOr<uint64_t> bytes = ParseCapacity(*flags.capacity);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--capacity: ", bytes.status().message()));
    }
    config.capacity_bytes = *bytes;
  }
  for (auto [name, value, field] :
       {std::tuple{"--listen", &flags.listen, &config.listen},
        std::tuple{"--advertise", &flags.advertise, &config.advertise},
        std::tuple{"--metrics-listen", &flags.metrics_listen, &config.metrics_listen}}) {
    if (!*value) continue;
    absl::Status valid = ValidateHostPort(name, **value);
    if (!valid.ok()) return valid;
    *field = **value;
  }
  if (flags.socket) config.socket_path = *flags.socket;
  if (flags.node_id) config.node_id = *flags.node_id;
  if (flags.group) config.group = *flags.group;
  if (flags.members) config.members_file = *flags.members;
  if (flags.etcd) config.etcd_url = *flags.etcd;
  if (flags.token_file) config.cluster_token_file = *flags.token_file;
  if (!flags.cache_dirs.empty()) config.cache_dirs = flags.cache_dirs;
  if (!flags.source_roots.empty()) config.source_roots = flags.source_roots;
  if (!flags.s3_endpoints.empty()) config.s3_endpoints = flags.s3_endpoints;
  for (const std::string& entry : flags.s3_endpoint_profiles) {
    const size_t equals = entry.rfind('=');
    if (equals == std::string::npos || equals == 0 || equals + 1 == entry.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--s3-endpoint-profile: '", entry, "' is not ENDPOINT=PROFILE"));
    }
    config.s3_endpoint_profiles[entry.substr(0, equals)] = entry.substr(equals + 1);
  }
  if (flags.admin_group) config.admin_group = *flags.admin_group;
  if (flags.source_journal) config.source_journal = *flags.source_journal;
  if (flags.insecure_tcp) config.insecure_tcp = true;
  if (flags.fill) config.fill_on_read = *flags.fill == "on-read";
  if (flags.version_grace_seconds) config.version_grace_seconds = *flags.version_grace_seconds;
  if (flags.locality_period_ms) config.locality_period_ms = *flags.locality_period_ms;
  if (flags.locality_max_age_seconds) {
    config.locality_max_age_seconds = *flags.locality_max_age_seconds;
  }
  if (flags.manifest_memory_mib) config.manifest_memory_mib = *flags.manifest_memory_mib;
  if (flags.s3_connect_timeout_ms) config.s3_connect_timeout_ms = *flags.s3_connect_timeout_ms;
  if (flags.s3_request_timeout_ms) config.s3_request_timeout_ms = *flags.s3_request_timeout_ms;
  if (!config.members_file.empty() && !config.etcd_url.empty()) {
    return absl::InvalidArgumentError(
        "both a members file and etcd are configured; cluster membership comes from one");
  }
  if (absl::Status tcp = CheckTcpPolicy(config); !tcp.ok()) return tcp;
  if (!config.cluster_token_file.empty()) {
    absl::StatusOr<std::string> token = LoadClusterToken(config.cluster_token_file);
    if (!token.ok()) return token.status();
  }
  return config;
}

int Run(int argc, char** argv) {
  KeepLargeBuffersInTheHeap();
  Flags flags;
  CLI::App app("granaryd: the Granary cache server of one node", "granaryd");
  app.add_option("--config", flags.config_file, "YAML configuration file")
      ->check(CLI::ExistingFile);
  app.add_option("--data-dir", flags.data_dir,
                 absl::StrCat("Catalog, index and lock (default: ", DefaultDataDir(), ")"));
  app.add_option("--capacity", flags.capacity,
                 "Cache capacity, e.g. 200GiB (default: 80% of the cache disks' free space)");
  app.add_option("--listen", flags.listen,
                 "TCP address for peers (default: none; 127.0.0.1:7070 with --members or --etcd)");
  app.add_option(
      "--socket", flags.socket,
      absl::StrCat("Unix socket for local clients (default: ", DefaultSocketPath(), ")"));
  app.add_option("--metrics-listen", flags.metrics_listen,
                 "Prometheus endpoint address (default 127.0.0.1:7071)");
  app.add_option("--cache-dir", flags.cache_dirs,
                 "Cache directory, repeatable, one per NVMe drive (default <data-dir>/cache)");
  app.add_option("--source-root", flags.source_roots,
                 "Directory datasets may be registered from, repeatable (default: none, so no "
                 "dataset can be registered)");
  app.add_option("--s3-endpoint", flags.s3_endpoints,
                 "S3 endpoint (scheme://host[:port]) datasets may be registered from, "
                 "repeatable (default: none, so no S3 dataset can be registered)");
  app.add_option("--s3-endpoint-profile", flags.s3_endpoint_profiles,
                 "ENDPOINT=PROFILE: the credentials profile that signs requests to ENDPOINT for "
                 "datasets that name none, repeatable (default: the config's "
                 "`s3_endpoint_profiles`, else AWS's environment variables and AWS_PROFILE)");
  app.add_option("--s3-connect-timeout-ms", flags.s3_connect_timeout_ms,
                 "How long a request to an S3 endpoint may take to connect (default: 5000, or "
                 "the config's `s3_connect_timeout_ms`)")
      ->check(CLI::Range(10, 600'000));
  app.add_option("--s3-request-timeout-ms", flags.s3_request_timeout_ms,
                 "How long a request to an S3 endpoint may take to be answered in full, before "
                 "it is retried (default: 60000, or the config's `s3_request_timeout_ms`)")
      ->check(CLI::Range(10, 3'600'000));
  app.add_option("--admin-group", flags.admin_group,
                 "Group whose members may register, refresh and remove datasets (default: root "
                 "alone)");
  app.add_option("--source-journal", flags.source_journal,
                 "File every source read, and every change to what the cache holds, is "
                 "appended to as JSON lines (default: none, or the config's `source_journal`)");
  app.add_option("--fill", flags.fill,
                 "For datasets registered without a fill policy: on-read (a cold read starts "
                 "filling the rest of the dataset in the background) or none (default: "
                 "on-read, or the config's `fill`)")
      ->check(CLI::IsMember({"on-read", "none"}));
  app.add_option("--version-grace-seconds", flags.version_grace_seconds,
                 "Release a dataset version refreshed away once it was retired this long and "
                 "nothing on this node used it for this long (default: 300, or the config's "
                 "`version_grace_seconds`)")
      ->check(CLI::Range(0, 30 * 86400));
  app.add_option("--locality-period-ms", flags.locality_period_ms,
                 "Publish this node's cached bytes per dataset to a random peer this often, "
                 "learning the others' (default: 1000, or the config's `locality_period_ms`)")
      ->check(CLI::Range(50, 600'000));
  app.add_option("--locality-max-age-seconds", flags.locality_max_age_seconds,
                 "Locate leaves out a node whose last report is older than this (default: 30, "
                 "or the config's `locality_max_age_seconds`)")
      ->check(CLI::Range(1, 86400));
  app.add_option("--manifest-memory-mib", flags.manifest_memory_mib,
                 "Memory for the manifests of dataset versions, in MiB; past it, those least "
                 "recently used are dropped and loaded again when needed (default: 1024, or the "
                 "config's `manifest_memory_mib`)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--node-id", flags.node_id, "This node's name (default: host name)");
  app.add_option("--group", flags.group, "This node's cache group (default: 'default')");
  auto* members = app.add_option("--members", flags.members, "Static cluster member list");
  app.add_option("--etcd", flags.etcd, "etcd URL for cluster membership")->excludes(members);
  app.add_option("--advertise", flags.advertise,
                 "HOST:PORT peers reach this node at (default: --listen)");
  app.add_option("--token-file", flags.token_file,
                 "File holding the cluster token that TCP calls must carry");
  app.add_flag("--insecure-tcp", flags.insecure_tcp,
               "Allow a TCP listener without a cluster token (every TCP call unauthenticated)");
  // CLI11 reports bad flags by throwing; nothing escapes past here.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }

  // Every file and directory granaryd creates (catalog, index, data files,
  // sockets before they are given their mode) is its own alone.
  ::umask(077);
  absl::StatusOr<GranarydConfig> config = BuildConfig(flags);
  if (!config.ok()) Fail(2, config.status().message());

  // Debian's Abseil is built with mutex deadlock detection on, which costs
  // every lock and unlock a graph update; gRPC locks a lot.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Every connection holds a descriptor; the soft limit (often 1024) would
  // let a few hundred idle clients exhaust them.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &files) != 0) {
      GRANARY_LOG(WARNING) << "cannot raise the open-file limit to " << files.rlim_max;
    }
  }
  StopSignals stop_signals;
  // A client vanishing mid-write must not kill the server.
  signal(SIGPIPE, SIG_IGN);

  absl::StatusOr<std::unique_ptr<GranaryServer>> server = GranaryServer::Start(*config);
  if (!server.ok()) Fail(1, server.status().message());
  int received = stop_signals.Wait();
  GRANARY_LOG(INFO) << "received " << (received == SIGTERM ? "SIGTERM" : "SIGINT")
                    << ", shutting down";
  (*server)->Shutdown();
  GRANARY_LOG(INFO) << "stopped";
  return 0;
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) { return granary::Run(argc, argv); }
