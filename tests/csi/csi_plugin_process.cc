#include "tests/csi/csi_plugin_process.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/base/file_util.h"
#include "common/base/status.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "tests/support/child_process.h"

namespace granary::testing {
namespace {

constexpr std::chrono::seconds kStartupTimeout{20};

std::shared_ptr<grpc::Channel> SocketChannel(const std::string& socket_path) {
  return grpc::CreateChannel("unix:" + socket_path, grpc::InsecureChannelCredentials());
}

}  // namespace

csi::v1::NodePublishVolumeRequest ReadOnlyPublishRequest(
    const std::string& target, const std::map<std::string, std::string>& attributes) {
  csi::v1::NodePublishVolumeRequest request;
  request.set_volume_id("granary-ds");
  request.set_target_path(target);
  request.set_readonly(true);
  request.mutable_volume_capability()->mutable_mount();
  request.mutable_volume_capability()->mutable_access_mode()->set_mode(
      csi::v1::VolumeCapability::AccessMode::MULTI_NODE_READER_ONLY);
  for (const auto& [key, value] : attributes) (*request.mutable_volume_context())[key] = value;
  return request;
}

std::string CsiPluginPath() { return GRANARY_TEST_CSI_PATH; }

absl::StatusOr<std::unique_ptr<CsiPluginProcess>> CsiPluginProcess::Start(
    const std::string& mount, const std::string& server,
    const std::vector<std::string>& extra_args) {
  std::unique_ptr<CsiPluginProcess> plugin(new CsiPluginProcess());
  plugin->socket_path_ = plugin->temp_.path() + "/csi.sock";
  plugin->log_path_ = plugin->temp_.path() + "/stderr";
  plugin->args_ = {"--endpoint", "unix://" + plugin->socket_path_, "--mount", mount, "--server",
                   server};
  plugin->args_.insert(plugin->args_.end(), extra_args.begin(), extra_args.end());
  GRANARY_RETURN_IF_ERROR(plugin->Spawn());
  return plugin;
}

CsiPluginProcess::~CsiPluginProcess() { KillChild(pid_); }

std::string CsiPluginProcess::log() const {
  return ReadFileToString(log_path_, "granary-csi log").value_or("");
}

absl::Status CsiPluginProcess::Spawn() {
  GRANARY_ASSIGN_OR_RETURN(pid_, SpawnChild(CsiPluginPath(), args_, log_path_));
  auto deadline = std::chrono::steady_clock::now() + kStartupTimeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (WaitForExit(pid_, std::chrono::milliseconds(0)).has_value()) {
      pid_ = -1;
      return absl::FailedPreconditionError(absl::StrCat("granary-csi exited:\n", log()));
    }
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    csi::v1::GetPluginInfoResponse info;
    if (Identity()->GetPluginInfo(&context, {}, &info).ok()) return absl::OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("granary-csi did not answer within ", kStartupTimeout.count(), " s:\n", log()));
}

std::unique_ptr<csi::v1::Identity::Stub> CsiPluginProcess::Identity() const {
  return csi::v1::Identity::NewStub(SocketChannel(socket_path_));
}

std::unique_ptr<csi::v1::Node::Stub> CsiPluginProcess::Node() const {
  return csi::v1::Node::NewStub(SocketChannel(socket_path_));
}

absl::Status CsiPluginProcess::Restart() {
  KillChild(pid_);
  pid_ = -1;
  return Spawn();
}

}  // namespace granary::testing
