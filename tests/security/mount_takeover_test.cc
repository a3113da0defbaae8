// Attacks on the connection keeper of a mount (fuse_client/connection_keeper.h):
// whoever is handed a mount's /dev/fuse connection answers every request
// made through it, so the keeper hands it only to processes of its own uid,
// and granary-fuse takes a mount over only from a keeper of its own uid.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "fuse_client/connection_keeper.h"
#include "tests/fuse/fuse_mount.h"
#include "tests/security/security_support.h"
#include "tests/support/child_process.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {
namespace {

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

class MountTakeoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<TestUser> user = EnsureTestUser("granary-takeover");
    ASSERT_TRUE(user.ok()) << user.status();
    attacker_ = *user;
    ASSERT_EQ(::mkdir(source_.c_str(), 0755), 0);
    std::ofstream(source_ + "/file") << "the dataset's bytes\n";
    absl::StatusOr<std::unique_ptr<GranarydProcess>> server = GranarydProcess::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    absl::StatusOr<CommandResult> added = granary::testing::Run(
        {CliPath(), "--server", server_->socket_address(), "dataset", "add", "ds", source_});
    ASSERT_TRUE(added.ok() && added->exit_code == 0) << (added.ok() ? added->stderr_text : "");
  }

  // The mount still serves root the source's bytes.
  void ExpectMountServes(const std::string& mountpoint) {
    std::ifstream in(mountpoint + "/ds/file");
    std::string line;
    std::getline(in, line);
    EXPECT_EQ(line, "the dataset's bytes");
  }

  TempDir base_;
  std::string source_ = base_.path() + "/src";
  TestUser attacker_;
  std::unique_ptr<GranarydProcess> server_;
};

TEST_F(MountTakeoverTest, AnotherUserCannotTakeARootMountOver) {
  absl::StatusOr<std::unique_ptr<FuseMount>> mount =
      FuseMount::Start(server_->socket_address(), {"-o", "allow_other"}, "ds");
  ASSERT_TRUE(mount.ok()) << mount.status();
  // The attacker can reach the mount point, as every user of allow_other can.
  ASSERT_EQ(::chmod(std::filesystem::path((*mount)->path()).parent_path().c_str(), 0755), 0);
  absl::StatusOr<CommandResult> attack =
      RunAs(attacker_, {FusePath(), (*mount)->path(), "--foreground", "--takeover", "--server",
                        server_->socket_address()});
  ASSERT_TRUE(attack.ok()) << attack.status();
  EXPECT_EQ(attack->exit_code, 1);
  EXPECT_NE(attack->stderr_text.find("is held by uid 0"), std::string::npos) << attack->stderr_text;
  ReportAttack({"new",
                "granary-takeover runs granary-fuse --takeover on root's mount point, to be "
                "handed its FUSE connection",
                "connection keeper socket", "refused: a keeper of another uid is never used",
                FirstLine(attack->stderr_text)});

  // The keeper itself, reached past granary-fuse's own check: it refuses
  // the connection before reading anything from it.
  absl::StatusOr<CommandResult> raw = RunAs(
      attacker_,
      {"/usr/bin/python3", "-c",
       "import array, socket, sys\n"
       "s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
       "s.connect(bytes.fromhex(sys.argv[1]))\n"
       "data, fds, flags, _ = socket.recv_fds(s, 65536, 4)\n"
       "print(len(fds), 'descriptors;', data[3:].decode(errors='replace'))\n",
       absl::BytesToHexString(fuse::KeeperSocketName((*mount)->path()))});
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(raw->exit_code, 0) << raw->stderr_text << raw->stdout_text;
  EXPECT_NE(raw->stdout_text.find("0 descriptors; the keeper of"), std::string::npos)
      << raw->stdout_text;
  EXPECT_NE(raw->stdout_text.find("hands it over only to processes of uid 0"), std::string::npos)
      << raw->stdout_text;
  ExpectMountServes((*mount)->path());
  EXPECT_TRUE((*mount)->Running());
  ReportAttack({"new",
                "granary-takeover connects to the keeper of root's mount to ask it for the "
                "connection directly",
                "connection keeper socket", "refused: the keeper hands over to its own uid only",
                FirstLine(raw->stdout_text)});
}

TEST_F(MountTakeoverTest, AKeeperSocketSquattedByAnotherUserIsRefused) {
  const std::string mountpoint = base_.path() + "/mnt";
  ASSERT_EQ(::mkdir(mountpoint.c_str(), 0755), 0);
  // The attacker binds the keeper's name for the mount point first, hoping
  // to be asked for a mount or handed one.
  const std::string name = fuse::KeeperSocketName(mountpoint);
  absl::StatusOr<pid_t> squatter =
      SpawnChild("/usr/bin/setpriv",
                 {absl::StrCat("--reuid=", attacker_.uid), absl::StrCat("--regid=", attacker_.gid),
                  "--clear-groups", "/usr/bin/python3", "-c",
                  "import socket, sys, time\n"
                  "s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
                  "s.bind(bytes.fromhex(sys.argv[1]))\n"
                  "s.listen()\n"
                  "print('bound', flush=True)\n"
                  "time.sleep(120)\n",
                  absl::BytesToHexString(name)},
                 base_.path() + "/squatter.log");
  ASSERT_TRUE(squatter.ok()) << squatter.status();
  for (int i = 0; i < 200; ++i) {
    std::ifstream log(base_.path() + "/squatter.log");
    std::string line;
    if (std::getline(log, line) && line == "bound") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  absl::StatusOr<CommandResult> mounted = granary::testing::Run(
      {FusePath(), mountpoint, "--foreground", "--server", server_->socket_address()});
  KillChild(*squatter);
  ASSERT_TRUE(mounted.ok()) << mounted.status();
  EXPECT_EQ(mounted->exit_code, 1);
  EXPECT_NE(mounted->stderr_text.find(absl::StrCat("is held by uid ", attacker_.uid)),
            std::string::npos)
      << mounted->stderr_text;
  ReportAttack({"new",
                "granary-takeover binds the connection keeper's socket name of a mount point "
                "before root mounts there",
                "connection keeper socket",
                "root's granary-fuse refuses the impostor keeper, naming its uid",
                FirstLine(mounted->stderr_text)});
}

}  // namespace
}  // namespace granary::testing
