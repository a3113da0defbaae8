// granary-fuse killed, restarted and upgraded in place under readers
// (README.md): the mount's connection keeper holds the FUSE connection, so a
// granary-fuse SIGKILLed with files open leaves the mount waiting, not dead,
// and the next one started on the mount point takes it over; `--takeover`
// does the same while the old one runs. Open descriptors, mmaps and new
// opens all keep reading the right bytes; a read in flight waits for the
// next process. SIGTERM still unmounts.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/unique_fd.h"
#include "nlohmann/json.hpp"
#include "tests/faults/fault_fixture.h"
#include "tests/support/child_process.h"

namespace granary::testing {
namespace {

class FuseRestartTest : public FaultTest {
 protected:
  // Reads 1 MiB of `file` at `offset` through `fd`, past the kernel's page
  // cache; the errno, or 0 if the bytes are right.
  int ReadHeld(int fd, const SourceFile& file, uint64_t offset) {
    std::string got(kChunk, '\0');
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ssize_t n = ::pread(fd, got.data(), got.size(), static_cast<off_t>(offset));
    if (n < 0) return errno;
    got.resize(static_cast<size_t>(n));
    return got == ExpectedBytes(file.seed, offset, kChunk) ? 0 : -1;
  }

  // The connection keeper the mount's granary-fuse forked, or 0.
  pid_t KeeperPid() {
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      const std::string name = entry.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream stat(entry.path() / "stat");
      std::string line;
      std::getline(stat, line);
      // pid (comm) state ppid ...
      const size_t comm_end = line.rfind(')');
      if (comm_end == std::string::npos || line.find("(granary-keeper)") == std::string::npos) {
        continue;
      }
      std::istringstream rest(line.substr(comm_end + 2));
      char state;
      pid_t parent = 0;
      rest >> state >> parent;
      if (parent == mount_->pid()) return static_cast<pid_t>(std::stol(name));
    }
    return 0;
  }

  // Whether process `pid` exists and has not exited (a zombie has).
  static bool Alive(pid_t pid) {
    std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
    std::string line;
    if (!std::getline(stat, line)) return false;
    const size_t comm_end = line.rfind(')');
    return comm_end != std::string::npos && comm_end + 2 < line.size() && line[comm_end + 2] != 'Z';
  }

  // How often process `pid` has slept and been woken.
  static long VoluntarySwitches(pid_t pid) {
    std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) return std::stol(line.substr(24));
    }
    return -1;
  }

  // Reads `file` through the mount into the cache, then opens it until an
  // open is handed the whole file (passed through). Until then the kernel
  // may not have sent the first open's RELEASE (it does in the background),
  // and while a file is open through granary-fuse it cannot be passed
  // through.
  int OpenPassedThrough(const SourceFile& file, ReadTally* tally) {
    const std::string path = mounted_ + "/" + file.path;
    const double whole = Metric("granary_store_whole_files_total");
    ReadAndVerify(path, file, tally);
    for (int attempt = 0; attempt < 50; ++attempt) {
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      EXPECT_GE(fd, 0) << std::strerror(errno);
      if (Metric("granary_store_whole_files_total") > whole) return fd;
      ::close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << file.path << " was never passed through";
    return -1;
  }
};

// The scenario: a DataLoader with 4 workers, each holding files and
// an mmap open, reads every file epoch after epoch while granary-fuse is
// SIGKILLed and restarted, then replaced with --takeover, round after round
// ($GRANARY_FAULT_ROUNDS of each, default 10).
TEST_F(FuseRestartTest, DataLoaderReadsOnWhileGranaryFuseIsKilledAndTakenOver) {
  const int rounds = EnvInt("GRANARY_FAULT_ROUNDS", 10);
  // Small files (read through at their first open, then passed through),
  // mid-sized ones, files too large to read through at an open (they stream
  // through granary-fuse), and the file the workers map.
  std::vector<SourceFile> files = WriteSourceTree(source_, "small-", 120, 96 << 10);
  for (const SourceFile& file : WriteSourceTree(source_, "mid-", 30, 600 << 10, 1000)) {
    files.push_back(file);
  }
  for (const SourceFile& file : WriteSourceTree(source_, "large-", 4, 12 * kChunk, 2000)) {
    files.push_back(file);
  }
  WriteSourceTree(source_, "mapped-", 1, 12 * kChunk, 3000);
  StartServerAndRegister();
  if (HasFatalFailure()) return;
  Mount();
  if (HasFatalFailure()) return;

  TempDir work;
  const std::string stop_file = work.path() + "/stop";
  const std::string output = work.path() + "/reader.out";
  absl::StatusOr<pid_t> reader = SpawnChild(
      "/usr/bin/python3",
      {GRANARY_FAULTS_DIR "/restart_reader.py", mounted_, source_, "mapped-0", stop_file}, output);
  ASSERT_TRUE(reader.ok()) << reader.status();
  // The first epoch under way: the server has served something.
  for (int i = 0; i < 600 && Metric("granary_source_reads_total") < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  double slowest_restart = 0, slowest_takeover = 0;
  for (int round = 0; round < rounds; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    mount_->Kill();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // Readers wait.
    Clock::time_point restarting = Clock::now();
    absl::Status restarted = mount_->Restart();
    ASSERT_TRUE(restarted.ok()) << "round " << round << ": " << restarted;
    slowest_restart = std::max(slowest_restart, SecondsSince(restarting));
  }
  for (int round = 0; round < rounds; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Clock::time_point taking = Clock::now();
    absl::Status taken = mount_->TakeOver();
    ASSERT_TRUE(taken.ok()) << "round " << round << ": " << taken;
    slowest_takeover = std::max(slowest_takeover, SecondsSince(taking));
  }
  // Readers wait for the mount while it is served by nobody: a stall of
  // seconds would be one they see.
  constexpr double kServedAgainWithinSeconds = 2;
  EXPECT_LT(slowest_restart, kServedAgainWithinSeconds);
  EXPECT_LT(slowest_takeover, kServedAgainWithinSeconds);
  std::ofstream(stop_file) << "stop\n";
  std::optional<int> status = WaitForExit(*reader, std::chrono::minutes(5));
  ASSERT_TRUE(status.has_value()) << "the reader did not finish";
  std::ifstream in(output);
  std::stringstream text;
  text << in.rdbuf();
  ASSERT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << text.str();
  const std::string last_line = text.str().substr(text.str().rfind('{'));
  nlohmann::json result = nlohmann::json::parse(last_line, nullptr, false);
  ASSERT_FALSE(result.is_discarded()) << text.str();
  EXPECT_EQ(result["errors"], 0) << result.dump();
  EXPECT_EQ(result["wrong"], 0) << result.dump();
  EXPECT_GE(result["epochs"].get<int>(), 2);
  EXPECT_NE(mount_->log().find("took "), std::string::npos) << mount_->log();

  ReadTally tally;
  tally.reads_verified = result["reads"].get<uint64_t>() - result["errors"].get<uint64_t>() -
                         result["wrong"].get<uint64_t>();
  tally.errors = result["errors"];
  tally.bytes_wrong = result["wrong"];
  ReportFaultRow(
      {"granary-fuse SIGKILLed and restarted, then upgraded with --takeover, under a "
       "DataLoader (4 workers, files and an mmap open)",
       2 * rounds, tally,
       absl::StrFormat("open descriptors and mmaps keep working; longest read %.2f s; "
                       "mount served again %.2f s after a restart, %.2f s after a takeover "
                       "started, at worst; %d epochs, %d files",
                       result["slowest"].get<double>(), slowest_restart, slowest_takeover,
                       result["epochs"].get<int>(), result["files"].get<int>())});
}

// Both kinds of open file, and the same files opened again while they are
// still open through the process that died: the kernel keeps an inode
// passed through or read through granary-fuse in one mode until its last
// release, and the next process must answer opens in that mode.
TEST_F(FuseRestartTest, HeldFilesReadOnAndOpenAgainAfterARestart) {
  const int rounds = EnvInt("GRANARY_FAULT_ROUNDS", 10);
  // Per round, a file to hold passed through and one read through
  // granary-fuse (too large to be read through at its open).
  std::vector<SourceFile> whole = WriteSourceTree(source_, "whole-", rounds, 4 * kChunk);
  std::vector<SourceFile> streamed = WriteSourceTree(source_, "streamed-", rounds, 12 * kChunk);
  StartServerAndRegister();
  if (HasFatalFailure()) return;
  Mount();
  if (HasFatalFailure()) return;
  ReadTally tally;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    const int passed = OpenPassedThrough(whole[round], &tally);
    const int served = ::open((mounted_ + "/" + streamed[round].path).c_str(), O_RDONLY);
    ASSERT_GE(served, 0) << std::strerror(errno);
    EXPECT_EQ(ReadHeld(passed, whole[round], 0), 0);
    EXPECT_EQ(ReadHeld(served, streamed[round], 0), 0);
    if (round % 2 == 0) {
      mount_->Kill();
      ASSERT_TRUE(mount_->Restart().ok());
    } else {
      ASSERT_TRUE(mount_->TakeOver().ok());
    }
    EXPECT_EQ(ReadHeld(passed, whole[round], kChunk), 0);
    EXPECT_EQ(ReadHeld(served, streamed[round], kChunk), 0);
    ReadAndVerify(mounted_ + "/" + whole[round].path, whole[round], &tally);
    ReadAndVerify(mounted_ + "/" + streamed[round].path, streamed[round], &tally);
    ::close(passed);
    ::close(served);
  }
  EXPECT_EQ(tally.errors, 0u) << (tally.first_errors.empty() ? "" : tally.first_errors.front());
  EXPECT_EQ(tally.bytes_wrong, 0u);
}

// SIGTERM is a stop, not a restart: granary-fuse unmounts, its keeper ends,
// and descriptors open through the mount fail; the next start mounts anew.
TEST_F(FuseRestartTest, TerminatedGranaryFuseUnmountsAndTheNextMountsAfresh) {
  std::vector<SourceFile> files = WriteSourceTree(source_, "file-", 2, 12 * kChunk);
  StartServerAndRegister();
  if (HasFatalFailure()) return;
  Mount();
  if (HasFatalFailure()) return;
  const int served = ::open((mounted_ + "/" + files[0].path).c_str(), O_RDONLY);
  ASSERT_GE(served, 0) << std::strerror(errno);
  ASSERT_TRUE(mount_->Terminate().ok());
  struct statfs fs;
  EXPECT_EQ(::statfs(mounted_.c_str(), &fs), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(ReadHeld(served, files[0], kChunk), ENOTCONN);
  ::close(served);
  ASSERT_TRUE(mount_->Restart().ok());
  ReadTally tally;
  ReadAndVerify(mounted_ + "/" + files[1].path, files[1], &tally);
  EXPECT_EQ(tally.errors + tally.bytes_wrong, 0u);
  EXPECT_NE(mount_->log().find("is being unmounted"), std::string::npos) << mount_->log();
}

// While a granary-fuse serves the mount, its keeper sleeps through the
// requests (it watches the connection only when no server does) and the opens
// (journaled in shared memory), and an unmount by someone else still ends both.
TEST_F(FuseRestartTest, TheKeeperSleepsThroughRequestsAndOpensAndEndsWithAnUnmountByAnyone) {
  std::vector<SourceFile> files = WriteSourceTree(source_, "file-", 1, kChunk);
  StartServerAndRegister();
  if (HasFatalFailure()) return;
  Mount();
  if (HasFatalFailure()) return;
  const pid_t keeper = KeeperPid();
  ASSERT_GT(keeper, 0);
  const long switches = VoluntarySwitches(keeper);
  constexpr int kLookups = 500;
  struct stat st;
  for (int i = 0; i < kLookups; ++i) {
    // A name never looked up before: a LOOKUP request each time.
    EXPECT_NE(::stat(absl::StrCat(mounted_, "/none-", i).c_str(), &st), 0);
  }
  EXPECT_LT(VoluntarySwitches(keeper) - switches, kLookups / 10)
      << "the keeper was woken by the requests";
  // Opens of a file granaryd holds whole and granary-fuse keeps between
  // opens: each is journaled in shared memory, with no backing file
  // registered or forgotten (messages that would wake the keeper). Until the
  // file is stored, each open is handed a new in-memory copy.
  ReadTally tally;
  const int passed = OpenPassedThrough(files[0], &tally);
  ASSERT_GE(passed, 0);
  ::close(passed);
  EXPECT_EQ(tally.errors + tally.bytes_wrong, 0u);
  const long before_opens = VoluntarySwitches(keeper);
  constexpr int kOpens = 500;
  for (int i = 0; i < kOpens; ++i) {
    const int fd = ::open((mounted_ + "/" + files[0].path).c_str(), O_RDONLY);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    ::close(fd);
  }
  EXPECT_LT(VoluntarySwitches(keeper) - before_opens, kOpens / 10)
      << "the keeper was woken by the opens and releases";
  ASSERT_EQ(std::system(absl::StrCat("fusermount3 -u '", mount_->path(), "'").c_str()), 0);
  for (int i = 0; i < 100 && (Alive(keeper) || mount_->Running()); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_FALSE(mount_->Running());
  EXPECT_FALSE(Alive(keeper)) << "the keeper outlived the unmount";
  // A keeper that ends with its mount is no error of the mount's.
  EXPECT_EQ(mount_->log().find("Z E "), std::string::npos) << mount_->log();
}

// A granary-fuse that dies and is never restarted: the keeper waits
// --orphan-timeout-seconds, then detaches the mount; waiting readers fail.
TEST_F(FuseRestartTest, AMountNoProcessTakesOverIsDetachedAfterTheOrphanTimeout) {
  std::vector<SourceFile> files = WriteSourceTree(source_, "file-", 1, 12 * kChunk);
  StartServerAndRegister();
  if (HasFatalFailure()) return;
  Mount({"--orphan-timeout-seconds", "1"});
  if (HasFatalFailure()) return;
  const int served = ::open((mounted_ + "/" + files[0].path).c_str(), O_RDONLY);
  ASSERT_GE(served, 0) << std::strerror(errno);
  mount_->Kill();
  Clock::time_point killed = Clock::now();
  // The read waits for a successor that never comes, then fails.
  EXPECT_NE(ReadHeld(served, files[0], kChunk), 0);
  EXPECT_GE(SecondsSince(killed), 0.9);
  ::close(served);
  struct statfs fs;
  for (int i = 0; i < 100 && ::statfs(mounted_.c_str(), &fs) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(::statfs(mounted_.c_str(), &fs), -1);
  EXPECT_NE(mount_->log().find("detaching the mount"), std::string::npos) << mount_->log();
}

// A second plain start on a served mount point is refused, naming the
// process that serves it; the mount goes on.
TEST_F(FuseRestartTest, AStartOnAServedMountPointIsRefusedWithoutTakeover) {
  std::vector<SourceFile> files = WriteSourceTree(source_, "file-", 1, kChunk);
  StartServerAndRegister();
  if (HasFatalFailure()) return;
  Mount();
  if (HasFatalFailure()) return;
  TempDir work;
  const std::string log = work.path() + "/second.log";
  absl::StatusOr<pid_t> second =
      SpawnChild(GranaryFusePath(),
                 {mount_->path(), "--foreground", "--server", server_->socket_address()}, log);
  ASSERT_TRUE(second.ok());
  std::optional<int> status = WaitForExit(*second, std::chrono::seconds(30));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1);
  std::ifstream in(log);
  std::string message((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(message.find(absl::StrCat("is served by granary-fuse ", mount_->pid(),
                                      "; --takeover replaces it")),
            std::string::npos)
      << message;
  ReadTally tally;
  ReadAndVerify(mounted_ + "/" + files[0].path, files[0], &tally);
  EXPECT_EQ(tally.errors + tally.bytes_wrong, 0u);
}

// Under systemd (Type=notify), the process serving the mount tells the
// service manager it is the main process: after a takeover, the new one.
TEST_F(FuseRestartTest, EachServingProcessTellsTheServiceManagerItIsTheMainOne) {
  WriteSourceTree(source_, "file-", 1, kChunk);
  StartServerAndRegister();
  if (HasFatalFailure()) return;
  TempDir work;
  const std::string socket_path = work.path() + "/notify";
  UniqueFd notify(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, socket_path.c_str(), socket_path.size());
  ASSERT_EQ(::bind(notify.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  timeval wait{.tv_sec = 30, .tv_usec = 0};
  ::setsockopt(notify.get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
  auto next_state = [&] {
    char state[256] = {};
    return ::recv(notify.get(), state, sizeof(state) - 1, 0) > 0 ? std::string(state)
                                                                 : std::string();
  };
  ::setenv("NOTIFY_SOCKET", socket_path.c_str(), 1);
  Mount();
  ::unsetenv("NOTIFY_SOCKET");
  if (HasFatalFailure()) return;
  EXPECT_EQ(next_state(), absl::StrCat("READY=1\nMAINPID=", mount_->pid(), "\n"));
  ::setenv("NOTIFY_SOCKET", socket_path.c_str(), 1);
  absl::Status taken = mount_->TakeOver();
  ::unsetenv("NOTIFY_SOCKET");
  ASSERT_TRUE(taken.ok()) << taken;
  EXPECT_EQ(next_state(), absl::StrCat("READY=1\nMAINPID=", mount_->pid(), "\n"));
}

}  // namespace
}  // namespace granary::testing
