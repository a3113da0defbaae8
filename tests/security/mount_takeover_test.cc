// Attacks on the connection keeper of a mount (fuse_client/restarts/connection_keeper.h):
// whoever is handed a mount's /dev/fuse connection answers every request
// made through it, so the keeper hands it only to processes of its own uid,
// and granary-fuse takes a mount over only from a keeper of its own uid. The
// keeper runs as root for root's mounts: neither the refusals a user provokes
// nor a path a user reshapes may make it flood the log or unmount another
// mount.
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "fuse_client/restarts/connection_keeper.h"
#include "tests/fuse/fuse_mount.h"
#include "tests/security/security_support.h"
#include "tests/support/child_process.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {
namespace {

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// The lines of `log` that contain `needle`.
std::vector<std::string> LinesWith(const std::string& log, const std::string& needle) {
  std::vector<std::string> found;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(needle) != std::string::npos) found.push_back(line);
  }
  return found;
}

// `line` from where `from` starts in it (the log's own prefix dropped).
std::string From(const std::string& line, const std::string& from) {
  const size_t at = line.find(from);
  return at == std::string::npos ? line : line.substr(at);
}

// Detaches, at the end of a test however it ends, what it mounted.
struct DetachedAtEnd {
  ~DetachedAtEnd() {
    for (const std::string& path : paths) ::umount2(path.c_str(), MNT_DETACH);
  }
  std::vector<std::string> paths;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

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
  absl::StatusOr<CommandResult> raw =
      RunAs(attacker_, {"/usr/bin/python3", "-c",
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

TEST_F(MountTakeoverTest, ConnectionsRefusedInALoopDoNotFloodTheKeepersLog) {
  absl::StatusOr<std::unique_ptr<FuseMount>> mount =
      FuseMount::Start(server_->socket_address(), {"-o", "allow_other"}, "ds");
  ASSERT_TRUE(mount.ok()) << mount.status();
  // The keeper's socket name is in /proc/net/unix for all to see; the
  // attacker connects to it as fast as it is accepted, for 3 s.
  absl::StatusOr<CommandResult> attack =
      RunAs(attacker_, {"/usr/bin/python3", "-c",
                        "import socket, sys, time\n"
                        "name, knocks, end = bytes.fromhex(sys.argv[1]), 0, time.monotonic() + 3\n"
                        "while time.monotonic() < end:\n"
                        "    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:\n"
                        "        s.connect(name)\n"
                        "        knocks += 1\n"
                        "print(knocks)\n",
                        absl::BytesToHexString(fuse::KeeperSocketName((*mount)->path()))});
  ASSERT_TRUE(attack.ok()) << attack.status();
  ASSERT_EQ(attack->exit_code, 0) << attack->stderr_text;
  const int knocks = std::stoi(attack->stdout_text);
  EXPECT_GT(knocks, 1000) << "too few connections to show a bound";
  // The last second's sum is logged once that second is over.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));

  const std::string log = (*mount)->log();
  const std::string uid = absl::StrCat("uid ", attacker_.uid);
  const std::vector<std::string> refusals = LinesWith(log, "connection keeper: refused");
  EXPECT_LE(refusals.size(), 40u) << knocks << " connections; log:\n" << log;
  EXPECT_FALSE(LinesWith(log, "refused a takeover by " + uid).empty()) << log;
  const std::vector<std::string> sums = LinesWith(log, "more takeovers by " + uid);
  ASSERT_FALSE(sums.empty()) << log;
  ExpectMountServes((*mount)->path());
  EXPECT_TRUE((*mount)->Running());
  ReportAttack({"2.6",
                absl::StrCat("granary-takeover connects to the keeper of root's mount in a loop (",
                             knocks, " connections in 3 s)"),
                "connection keeper socket",
                "refused; 5 lines a second per uid and a sum of the rest, the mount serves",
                absl::StrCat(refusals.size(), " log lines, e.g. ",
                             From(sums.front(), "connection keeper:"))});
}

TEST_F(MountTakeoverTest, AnOrphanedKeeperDetachesNoMountAPathSwappedByAUserLeadsTo) {
  // Root's mount point lies below a directory the attacker may rename: her
  // home holds a project directory of root's, mounted on.
  ASSERT_EQ(::chmod(base_.path().c_str(), 0755), 0);
  const std::string home = base_.path() + "/home";
  const std::string mountpoint = home + "/data/mnt";
  ASSERT_EQ(::mkdir(home.c_str(), 0755), 0);
  ASSERT_EQ(::chown(home.c_str(), attacker_.uid, attacker_.gid), 0);
  ASSERT_TRUE(std::filesystem::create_directories(mountpoint));
  // An unrelated mount: the one the swapped path leads to.
  const std::string elsewhere = base_.path() + "/elsewhere";
  const std::string victim = elsewhere + "/mnt";
  ASSERT_TRUE(std::filesystem::create_directories(victim));
  DetachedAtEnd detached{{victim, home + "/moved/mnt", mountpoint}};
  ASSERT_EQ(::mount("tmpfs", victim.c_str(), "tmpfs", 0, "size=1m"), 0) << std::strerror(errno);
  std::ofstream(victim + "/kept") << "still mounted\n";
  const std::string log_path = base_.path() + "/granary-fuse.log";
  absl::StatusOr<pid_t> fuse = SpawnChild(FusePath(),
                                          {mountpoint, "--foreground", "--orphan-timeout-seconds",
                                           "2", "--server", server_->socket_address()},
                                          log_path);
  ASSERT_TRUE(fuse.ok()) << fuse.status();
  struct statfs fs;
  for (int i = 0; i < 500 && ::statfs((mountpoint + "/ds").c_str(), &fs) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(::statfs((mountpoint + "/ds").c_str(), &fs), 0) << ReadAll(log_path);

  // granary-fuse dies; while its keeper waits for a successor, the
  // attacker moves the project away and leaves a symlink in its place.
  KillChild(*fuse);
  absl::StatusOr<CommandResult> swap =
      RunAs(attacker_, {"/bin/sh", "-c",
                        absl::StrCat("mv ", home, "/data ", home, "/moved && ln -s ", elsewhere,
                                     " ", home, "/data")});
  ASSERT_TRUE(swap.ok()) << swap.status();
  ASSERT_EQ(swap->exit_code, 0) << swap->stderr_text;
  std::string log;
  for (int i = 0; i < 200 && LinesWith(log, "nothing was detached").empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    log = ReadAll(log_path);
  }
  EXPECT_FALSE(LinesWith(log, "detaching the mount").empty()) << log;

  ASSERT_EQ(::statfs(victim.c_str(), &fs), 0);
  EXPECT_EQ(fs.f_type, TMPFS_MAGIC) << "the keeper detached the mount the symlink leads to";
  EXPECT_EQ(ReadAll(victim + "/kept"), "still mounted\n");
  const std::vector<std::string> refusal = LinesWith(log, "nothing was detached");
  ASSERT_FALSE(refusal.empty()) << log;
  EXPECT_NE(refusal.front().find("is a symlink now"), std::string::npos) << refusal.front();
  ReportAttack({"2.7",
                "granary-takeover replaces a directory above root's orphaned mount point by a "
                "symlink to another mount, before the keeper detaches its mount",
                "mount point path",
                "the keeper reaches the mount point through no symlink and detaches nothing else",
                From(refusal.front(), "connection keeper:")});
}

}  // namespace
}  // namespace granary::testing
