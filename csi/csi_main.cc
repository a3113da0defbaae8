// granary-csi: the CSI v1 node plugin of Granary. Serves the Identity and
// Node services on a Unix socket (--endpoint, as the kubelet and the
// node-driver-registrar expect it) and publishes datasets of the node's
// granary-fuse mount (--mount) into pods as read-only bind mounts. Runs as
// root (it mounts) until SIGINT or SIGTERM; the socket is its owner's alone
// (no permission for group or others), so only root, as the kubelet runs,
// can ask it to mount.
// Published volumes are plain mounts: they outlive a restart of granary-csi.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/dataset_client.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/base/stop_signals.h"
#include "common/net/defaults.h"
#include "common/net/server_address.h"
#include "common/scheduling/prewarm_queue.h"
#include "csi/csi_services.h"
#include "csi/dataset_mounts.h"
#include "csi/volume_request.h"
#include "grpcpp/server_builder.h"

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

struct Flags {
  std::string endpoint = "unix:///csi/csi.sock";
  std::string mount = "/mnt/granary";
  std::string node_id;
  std::string group = granary::kDefaultGroup;
  std::string server;
  bool prewarm = true;
};

// The socket path of a CSI endpoint, "unix:///PATH" or "unix:/PATH".
absl::StatusOr<std::string> EndpointPath(const std::string& endpoint) {
  std::string_view path = endpoint;
  if (absl::StartsWith(endpoint, "unix://")) {
    path.remove_prefix(7);
  } else if (absl::StartsWith(endpoint, "unix:")) {
    path.remove_prefix(5);
  } else {
    path = {};
  }
  if (path.empty() || path.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("--endpoint '", endpoint, "' is not a Unix socket address (unix:///PATH)"));
  }
  GRANARY_RETURN_IF_ERROR(granary::UnixSocketAddress(path).status());
  return std::string(path);
}

// A socket left by a granary-csi that stopped is removed; anything else at
// the path is left alone and refused.
absl::Status ClearStaleSocket(const std::string& path) {
  struct stat existing;
  if (lstat(path.c_str(), &existing) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return granary::ErrnoStatus(errno, absl::StrCat("--endpoint ", path));
  }
  if (!S_ISSOCK(existing.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("--endpoint ", path, " exists and is not a socket; not replacing it"));
  }
  if (unlink(path.c_str()) != 0) {
    return granary::ErrnoStatus(errno, absl::StrCat("removing the old socket ", path));
  }
  return absl::OkStatus();
}

std::string HostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

absl::Status Run(const Flags& flags) {
  // Before any thread starts (gRPC's too), so that only Wait() below sees them.
  granary::StopSignals stop_signals;
  GRANARY_RETURN_IF_ERROR(granary::csi_driver::CheckAbsolutePath("--mount", flags.mount));
  if (flags.mount.size() > 1 && flags.mount.back() == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("--mount '", flags.mount, "' must not end in '/'"));
  }
  GRANARY_ASSIGN_OR_RETURN(std::string socket_path, EndpointPath(flags.endpoint));
  std::string server = granary::ResolveServerAddress(flags.server);
  GRANARY_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> granaryd, granary::MakeChannel(server));
  std::unique_ptr<granary::DatasetClient> datasets =
      granary::DatasetClient::OverChannel(server, {}, granaryd);
  granary::csi_driver::DatasetMounts mounts(flags.mount);
  std::unique_ptr<granary::PrewarmQueue> prewarmer;
  if (flags.prewarm) {
    prewarmer = std::make_unique<granary::PrewarmQueue>(granaryd, "on placement");
  }
  granary::csi_driver::PodJobs pod_jobs(granaryd);
  granary::csi_driver::IdentityService identity(&mounts);
  granary::csi_driver::NodeService node(
      {.id = flags.node_id.empty() ? HostName() : flags.node_id, .group = flags.group}, &mounts,
      datasets.get(), prewarmer.get(), &pod_jobs);

  GRANARY_RETURN_IF_ERROR(ClearStaleSocket(socket_path));
  // The socket gets no permission for group or others: only root connects.
  umask(077);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket_path, grpc::InsecureServerCredentials());
  builder.RegisterService(&identity);
  builder.RegisterService(&node);
  std::unique_ptr<grpc::Server> grpc_server = builder.BuildAndStart();
  if (grpc_server == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot listen on --endpoint ", socket_path));
  }
  if (absl::Status serving = mounts.CheckServing(); !serving.ok()) {
    GRANARY_LOG(WARNING) << "not ready yet: " << serving.message();
  }
  GRANARY_LOG(INFO) << "granary-csi " << granary::kDriverName << " serving on " << socket_path
                    << ", publishing datasets of " << flags.mount << " (sizes from " << server
                    << ")";
  GRANARY_LOG(INFO) << "stopping on signal " << stop_signals.Wait();
  grpc_server->Shutdown();
  unlink(socket_path.c_str());
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("granary-csi: CSI node plugin publishing Granary datasets into pods read-only",
               "granary-csi");
  Flags flags;
  app.add_option("--endpoint", flags.endpoint, "CSI socket, unix:///PATH")
      ->envname("CSI_ENDPOINT")
      ->capture_default_str();
  app.add_option("--mount", flags.mount, "granary-fuse's mount point on this node")
      ->capture_default_str();
  app.add_option("--node-id", flags.node_id,
                 "This node's id, as granaryd's --node-id (default: the host name)");
  app.add_option("--group", flags.group,
                 "This node's cache group, as granaryd's --group; reported as topology "
                 "topology.granary.io/group")
      ->capture_default_str();
  app.add_option("--server", flags.server,
                 "granaryd address for dataset sizes and versions, unix:PATH or HOST:PORT "
                 "(default: $GRANARY_SERVER, else the local socket)");
  app.add_flag("!--no-prewarm", flags.prewarm,
               "Do not prewarm a dataset for this node's cache group when it is published");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) return app.exit(error);
    std::fprintf(stderr, "granary-csi: %s (see granary-csi --help)\n", error.what());
    return kExitUsage;
  }
  absl::Status status = Run(flags);
  if (status.ok()) return 0;
  std::fprintf(stderr, "granary-csi: %s\n", std::string(status.message()).c_str());
  return kExitFailure;
}
