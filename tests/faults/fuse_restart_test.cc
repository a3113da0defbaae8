// granary-fuse restarted while a reader holds files open, round after round
// ($GRANARY_FAULT_ROUNDS, default 10). What the reader sees (README.md): a
// file the local granaryd holds whole is passed through, so the kernel reads
// it from the cache's data file and its open descriptor keeps reading the
// right bytes after granary-fuse is SIGKILLed or SIGTERMed and after it is
// restarted. A file read through granary-fuse fails with ENOTCONN after a
// SIGKILL, as do new calls on the mount; a granary-fuse started again on the
// same mount point detaches the dead mount and mounts afresh, so new opens
// work at once and read the right bytes, while such descriptors stay dead (the
// kernel ties them to the old connection): a reader reopens its files. After
// SIGTERM granary-fuse unmounts itself: the directory is empty (ENOENT) until
// the restart, which needs nothing more.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/faults/fault_fixture.h"

namespace granary::testing {
namespace {

class FuseRestartTest : public FaultTest {
 protected:
  void SetUp() override {
    rounds_ = EnvInt("GRANARY_FAULT_ROUNDS", 10);
    // Per round, a file to hold passed through and one never read before,
    // too large to be read through at its open (granary-fuse reads files of
    // up to 8 MiB through at their first open and passes them through).
    whole_ = WriteSourceTree(source_, "whole-", rounds_, 4 * kChunk);
    fresh_ = WriteSourceTree(source_, "fresh-", rounds_, 12 * kChunk);
    StartServerAndRegister();
    Mount();
  }

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

  // Reads `file` through the mount into the cache, then opens it until an
  // open is handed the whole file. Once one was (the first, for a file read
  // through at its open), granary-fuse keeps it and passes every later open
  // through; until then the kernel may not have sent the first open's
  // RELEASE (it does in the background), and while a file is open through
  // granary-fuse it cannot be passed through.
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

  // Stops granary-fuse with `signal` while two files are open and half read,
  // one passed through and one read through granary-fuse, restarts it, and
  // checks what the reader sees: `path_errno` on new calls; returns the
  // seconds from the restart to a mount that serves new opens.
  double RestartWithFilesOpen(int round, int signal, int path_errno, ReadTally* tally) {
    const SourceFile& whole = whole_[round];
    const SourceFile& fresh = fresh_[round];
    const int passed = OpenPassedThrough(whole, tally);
    const int served = ::open((mounted_ + "/" + fresh.path).c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(served, 0) << std::strerror(errno);
    EXPECT_EQ(ReadHeld(passed, whole, 0), 0);
    EXPECT_EQ(ReadHeld(served, fresh, 0), 0);
    if (signal == SIGKILL) {
      mount_->Kill();
    } else {
      absl::Status terminated = mount_->Terminate();
      EXPECT_TRUE(terminated.ok()) << terminated;
    }
    EXPECT_EQ(ReadHeld(passed, whole, kChunk), 0) << "the kernel reads the data file itself";
    EXPECT_EQ(ReadHeld(served, fresh, kChunk), ENOTCONN);
    struct statfs fs;
    EXPECT_EQ(::statfs(mounted_.c_str(), &fs), -1);
    EXPECT_EQ(errno, path_errno) << std::strerror(errno);

    Clock::time_point restarting = Clock::now();
    absl::Status restarted = mount_->Restart();
    const double seconds = SecondsSince(restarting);
    EXPECT_TRUE(restarted.ok()) << restarted;
    // The file read through granary-fuse stays dead; the passed-through one
    // reads on; new opens read right.
    EXPECT_EQ(ReadHeld(passed, whole, 2 * kChunk), 0);
    EXPECT_NE(ReadHeld(served, fresh, 2 * kChunk), 0);
    ::close(passed);
    ::close(served);
    ReadAndVerify(mounted_ + "/" + whole.path, whole, tally);
    ReadAndVerify(mounted_ + "/" + fresh.path, fresh, tally);
    return seconds;
  }

  int rounds_ = 0;
  std::vector<SourceFile> whole_;
  std::vector<SourceFile> fresh_;
};

TEST_F(FuseRestartTest, KilledAndTerminatedWithFilesOpenTheSameMountPointServesAgain) {
  if (HasFatalFailure()) return;
  // Half the rounds kill granary-fuse, half stop it.
  ReadTally tally;
  double slowest_after_kill = 0, slowest_after_term = 0;
  for (int round = 0; round < rounds_; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    if (round % 2 == 0) {
      slowest_after_kill =
          std::max(slowest_after_kill, RestartWithFilesOpen(round, SIGKILL, ENOTCONN, &tally));
    } else {
      // The stopped process unmounted: the directory is empty until the restart.
      slowest_after_term =
          std::max(slowest_after_term, RestartWithFilesOpen(round, SIGTERM, ENOENT, &tally));
    }
  }
  EXPECT_NE(mount_->log().find("dead FUSE mount"), std::string::npos) << mount_->log();
  EXPECT_EQ(tally.errors, 0u) << tally.first_errors.front();
  EXPECT_EQ(tally.bytes_wrong, 0u);
  ReportFaultRow(
      {"granary-fuse SIGKILLed / SIGTERMed with a file open, restarted on the same "
       "mount point",
       rounds_, tally,
       absl::StrFormat("open descriptors of files held whole (passed through) read on; other "
                       "open descriptors fail with ENOTCONN and stay dead; new opens work "
                       "%.2f s (SIGKILL) / %.2f s (SIGTERM) after the restart at worst, no "
                       "remount by the job",
                       slowest_after_kill, slowest_after_term)});
}

}  // namespace
}  // namespace granary::testing
