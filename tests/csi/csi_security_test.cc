// Who may use granary-csi, and what a pod's user reads through a published
// volume, tried by a user the test creates (the suite runs as root): the CSI
// socket is root's alone, and a published dataset shows the source's owners
// and modes, so a pod's user reads through it only what the source lets it.
// A target_path a user could shape (a symlink planted where the kubelet will
// ask for the mount) is refused.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
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

TEST_F(CsiSecurityTest, ASymlinkAtTargetPathIsRefusedAndNothingIsMountedWhereItLeads) {
  // The pod's volume directory is the user's to write; where the kubelet
  // will ask for the mount she puts a symlink to a directory of root's.
  const std::string volume = pods_.path() + "/volume";
  ASSERT_EQ(mkdir(volume.c_str(), 0755), 0);
  ASSERT_EQ(chown(volume.c_str(), user_.uid, user_.gid), 0);
  const std::string elsewhere = pods_.path() + "/elsewhere";
  ASSERT_EQ(mkdir(elsewhere.c_str(), 0755), 0);
  std::ofstream(elsewhere + "/own") << "root's own file\n";
  const std::string target = volume + "/mount";
  absl::StatusOr<CommandResult> planted = RunAs(user_, {"/bin/ln", "-s", elsewhere, target});
  ASSERT_TRUE(planted.ok()) << planted.status();
  ASSERT_EQ(planted->exit_code, 0) << planted->stderr_text;

  grpc::ClientContext context;
  csi::v1::NodePublishVolumeResponse response;
  grpc::Status published = plugin_->Node()->NodePublishVolume(
      &context, ReadOnlyPublishRequest(target, {{"dataset", "ds"}}), &response);
  struct stat parent, where;
  ASSERT_EQ(stat(pods_.path().c_str(), &parent), 0);
  ASSERT_EQ(stat(elsewhere.c_str(), &where), 0);
  if (where.st_dev != parent.st_dev) umount2(elsewhere.c_str(), MNT_DETACH);
  EXPECT_EQ(published.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(published.error_message().find(target + " is a symbolic link"), std::string::npos)
      << published.error_message();
  EXPECT_EQ(where.st_dev, parent.st_dev) << "the dataset was mounted where the symlink leads";
  EXPECT_TRUE(std::filesystem::is_regular_file(elsewhere + "/own"));
  ReportAttack({"2.8",
                "a pod's user makes target_path a symlink to a directory of root's before "
                "the kubelet publishes the volume there",
                "CSI NodePublishVolume",
                "FAILED_PRECONDITION naming the symlink; nothing mounted where it leads",
                published.error_message()});

  grpc::ClientContext unpublish_context;
  csi::v1::NodeUnpublishVolumeRequest unpublish;
  unpublish.set_volume_id("granary-ds");
  unpublish.set_target_path(target);
  csi::v1::NodeUnpublishVolumeResponse unpublished;
  grpc::Status refused =
      plugin_->Node()->NodeUnpublishVolume(&unpublish_context, unpublish, &unpublished);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(refused.error_message().find("is a symbolic link"), std::string::npos)
      << refused.error_message();
  EXPECT_TRUE(std::filesystem::is_directory(elsewhere));
}

}  // namespace
}  // namespace granary::testing
