// Who may use granary-csi, and what a pod's user reads through a published
// volume, tried by a user the test creates (the suite runs as root): the CSI
// socket is root's alone, and a published dataset shows the source's owners
// and modes, so a pod's user reads through it only what the source lets it.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "grpcpp/client_context.h"
#include "tests/csi/csi_plugin_process.h"
#include "tests/fuse/mounted_tree.h"
#include "tests/security/security_support.h"

namespace granary::testing {
namespace {

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

class CsiSecurityTest : public MountedTree {
 protected:
  void BuildTree() override {
    WriteFile(source_ + "/public.txt", "anyone may read this");
    WriteFile(source_ + "/private.bin", "root's alone");
    ASSERT_EQ(chmod((source_ + "/public.txt").c_str(), 0644), 0);
    ASSERT_EQ(chmod((source_ + "/private.bin").c_str(), 0600), 0);
  }
  // As the DaemonSet mounts it: every pod's user reaches the mount, and the
  // kernel checks the source's owners and modes.
  std::vector<std::string> MountArgs() const override { return {"-o", "allow_other"}; }

  void SetUp() override {
    MountedTree::SetUp();
    if (HasFatalFailure()) return;
    absl::StatusOr<TestUser> user = EnsureTestUser("granary-csi-pod");
    ASSERT_TRUE(user.ok()) << user.status();
    user_ = *user;
    auto plugin = CsiPluginProcess::Start(mount_->path(), server_->socket_address());
    ASSERT_TRUE(plugin.ok()) << plugin.status();
    plugin_ = *std::move(plugin);
    ASSERT_EQ(chmod(pods_.path().c_str(), 0755), 0);
    target_ = pods_.path() + "/mount";
  }

  TempDir pods_;
  TestUser user_;
  std::unique_ptr<CsiPluginProcess> plugin_;
  std::string target_;
};

TEST_F(CsiSecurityTest, AUserOtherThanRootCannotReachTheSocket) {
  struct stat socket_stat;
  ASSERT_EQ(stat(plugin_->socket_path().c_str(), &socket_stat), 0);
  EXPECT_EQ(socket_stat.st_mode & 077, 0u) << "no access for group or others";
  EXPECT_EQ(socket_stat.st_uid, 0u);
  // The directory is reachable, so only the socket's own mode refuses.
  ASSERT_EQ(chmod(std::filesystem::path(plugin_->socket_path()).parent_path().c_str(), 0755), 0);

  absl::StatusOr<CommandResult> connected =
      RunAs(user_, {"/usr/bin/python3", "-c",
                    "import socket, sys\n"
                    "socket.socket(socket.AF_UNIX).connect(sys.argv[1])\n",
                    plugin_->socket_path()});
  ASSERT_TRUE(connected.ok()) << connected.status();
  EXPECT_NE(connected->exit_code, 0) << "a user other than root reached the CSI socket";
  EXPECT_NE(connected->stderr_text.find("Permission denied"), std::string::npos)
      << connected->stderr_text;
  ReportAttack({"new", "a local user asks granary-csi to mount a dataset", "CSI socket",
                "connection refused by the socket's mode (owner root, nothing for others)",
                FirstLine(connected->stderr_text.substr(connected->stderr_text.rfind("Error")))});
}

TEST_F(CsiSecurityTest, APodsUserReadsThroughTheVolumeOnlyWhatTheSourceLetsIt) {
  csi::v1::NodePublishVolumeRequest request = ReadOnlyPublishRequest(target_, {{"dataset", "ds"}});
  grpc::ClientContext context;
  csi::v1::NodePublishVolumeResponse response;
  grpc::Status published = plugin_->Node()->NodePublishVolume(&context, request, &response);
  ASSERT_TRUE(published.ok()) << published.error_message();

  absl::StatusOr<CommandResult> readable = RunAs(user_, {"/bin/cat", target_ + "/public.txt"});
  ASSERT_TRUE(readable.ok()) << readable.status();
  EXPECT_EQ(readable->stdout_text, "anyone may read this") << readable->stderr_text;

  absl::StatusOr<CommandResult> refused = RunAs(user_, {"/bin/cat", target_ + "/private.bin"});
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_NE(refused->exit_code, 0);
  EXPECT_EQ(refused->stdout_text, "");
  EXPECT_NE(refused->stderr_text.find("Permission denied"), std::string::npos)
      << refused->stderr_text;
  ReportAttack({"new", "a pod's user reads a root-only file of its published dataset",
                "CSI volume (bind mount)", "EACCES: the source's owner and mode",
                FirstLine(refused->stderr_text)});

  absl::StatusOr<CommandResult> written =
      RunAs(user_, {"/bin/sh", "-c", "echo x > " + target_ + "/new"});
  ASSERT_TRUE(written.ok());
  EXPECT_NE(written->exit_code, 0) << "the volume is read-only";

  grpc::ClientContext unpublish_context;
  csi::v1::NodeUnpublishVolumeRequest unpublish;
  unpublish.set_volume_id("granary-ds");
  unpublish.set_target_path(target_);
  csi::v1::NodeUnpublishVolumeResponse unpublished;
  EXPECT_TRUE(
      plugin_->Node()->NodeUnpublishVolume(&unpublish_context, unpublish, &unpublished).ok());
}

}  // namespace
}  // namespace granary::testing
