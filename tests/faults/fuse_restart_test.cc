// granary-fuse restarted while a reader holds files open, round after round
// ($GRANARY_FAULT_ROUNDS, default 10). What the reader sees (README.md): after
// a SIGKILL, reads of files already open and new calls on the mount fail with
// ENOTCONN; a granary-fuse started again on the same mount point detaches the
// dead mount and mounts afresh, so new opens work at once and read the right
// bytes, while descriptors opened before stay dead (the kernel ties them to
// the old connection): a reader reopens its files. After SIGTERM granary-fuse
// unmounts itself: open files fail with ENOTCONN, the directory is empty
// (ENOENT) until the restart, which needs nothing more.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/faults/fault_fixture.h"

namespace granary::testing {
namespace {

class FuseRestartTest : public FaultTest {
 protected:
  void SetUp() override {
    files_ = WriteSourceTree(source_, "held-", 4, 4 * kChunk);
    StartServerAndRegister();
    Mount();
  }

  // Reads 1 MiB of file 0 at `offset` through `fd`, past the kernel's page
  // cache; the errno, or 0 if the bytes are right.
  int ReadHeld(int fd, uint64_t offset) {
    std::string got(kChunk, '\0');
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ssize_t n = ::pread(fd, got.data(), got.size(), static_cast<off_t>(offset));
    if (n < 0) return errno;
    got.resize(static_cast<size_t>(n));
    return got == ExpectedBytes(files_[0].seed, offset, kChunk) ? 0 : -1;
  }

  // Stops granary-fuse with `signal` while a file is open and half read,
  // restarts it, and checks what the reader sees: `held_errno` on the open
  // file, `path_errno` on new calls; returns the seconds from the restart to a
  // mount that serves new opens.
  double RestartWithFileOpen(int signal, int held_errno, int path_errno, ReadTally* tally) {
    int fd = ::open((mounted_ + "/" + files_[0].path).c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0) << std::strerror(errno);
    EXPECT_EQ(ReadHeld(fd, 0), 0);
    if (signal == SIGKILL) {
      mount_->Kill();
    } else {
      absl::Status terminated = mount_->Terminate();
      EXPECT_TRUE(terminated.ok()) << terminated;
    }
    EXPECT_EQ(ReadHeld(fd, kChunk), held_errno) << std::strerror(ReadHeld(fd, kChunk));
    struct statfs fs;
    EXPECT_EQ(::statfs(mounted_.c_str(), &fs), -1);
    EXPECT_EQ(errno, path_errno) << std::strerror(errno);

    Clock::time_point restarting = Clock::now();
    absl::Status restarted = mount_->Restart();
    const double seconds = SecondsSince(restarting);
    EXPECT_TRUE(restarted.ok()) << restarted;
    // The descriptor opened before stays dead; new opens read right.
    EXPECT_NE(ReadHeld(fd, 2 * kChunk), 0);
    ::close(fd);
    for (const SourceFile& file : files_) ReadAndVerify(mounted_ + "/" + file.path, file, tally);
    return seconds;
  }

  std::vector<SourceFile> files_;
};

TEST_F(FuseRestartTest, KilledAndTerminatedWithFilesOpenTheSameMountPointServesAgain) {
  if (HasFatalFailure()) return;
  // Half the rounds kill granary-fuse, half stop it.
  const int rounds = EnvInt("GRANARY_FAULT_ROUNDS", 10);
  ReadTally tally;
  double slowest_after_kill = 0, slowest_after_term = 0;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    if (round % 2 == 0) {
      slowest_after_kill =
          std::max(slowest_after_kill, RestartWithFileOpen(SIGKILL, ENOTCONN, ENOTCONN, &tally));
    } else {
      // The stopped process unmounted: the directory is empty until the restart.
      slowest_after_term =
          std::max(slowest_after_term, RestartWithFileOpen(SIGTERM, ENOTCONN, ENOENT, &tally));
    }
  }
  EXPECT_NE(mount_->log().find("dead FUSE mount"), std::string::npos) << mount_->log();
  EXPECT_EQ(tally.errors, 0u) << tally.first_errors.front();
  EXPECT_EQ(tally.bytes_wrong, 0u);
  ReportFaultRow(
      {"granary-fuse SIGKILLed / SIGTERMed with a file open, restarted on the same "
       "mount point",
       rounds, tally,
       absl::StrFormat("open descriptors fail with ENOTCONN and stay dead; new opens "
                       "work %.2f s (SIGKILL) / %.2f s (SIGTERM) after the restart at "
                       "worst, no remount by the job",
                       slowest_after_kill, slowest_after_term)});
}

}  // namespace
}  // namespace granary::testing
