// The source disappears, or turns unreadable, in the middle of an epoch, round
// after round ($GRANARY_FAULT_ROUNDS, default 10): chunks already cached keep
// reading right; the others fail with an error naming the file (over gRPC:
// the status message; through the mount: an errno for the reader, the file in
// granary-fuse's log); once the source is back, the same reads succeed with
// the right bytes, without restarting anything.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/faults/fault_fixture.h"
#include "tests/server/server_test_util.h"

namespace granary::testing {
namespace {

class SourceTest : public FaultTest {
 protected:
  // Reads chunk 0 of `file` over gRPC.
  ReadResult ReadFirstChunk(const SourceFile& file) {
    return ReadChunk(stub_.get(), info_.version(), FileId(file.path), 0);
  }

  // Reads `file` through the mount; the errno of a failure, 0 on success
  // (checked into `tally`).
  int ReadThroughMount(const SourceFile& file, ReadTally* tally) {
    const uint64_t errors = tally->errors;
    ReadAndVerify(mounted_ + "/" + file.path, file, tally);
    if (tally->errors == errors) return 0;
    tally->errors = errors;  // Expected here: counted by the caller.
    const std::string& last = tally->first_errors.back();
    for (int error : {ESTALE, EIO, EACCES, ENOENT}) {
      if (last.ends_with(std::strerror(error))) return error;
    }
    return -1;
  }

  // A source back is read at the next request: no cached failure outlives it.
  static constexpr double kReadableAgainWithinSeconds = 2;

  // Waits until `file` reads right over gRPC; the seconds it took.
  double SecondsUntilReadable(const SourceFile& file) {
    Clock::time_point start = Clock::now();
    while (!ReadFirstChunk(file).status.ok() && SecondsSince(start) < 10) {
    }
    return SecondsSince(start);
  }
};

TEST_F(SourceTest, SourceDisappearsMidEpochAndComesBack) {
  const int rounds = EnvInt("GRANARY_FAULT_ROUNDS", 10);
  constexpr int kCached = 8;
  const std::vector<SourceFile> files =
      WriteSourceTree(source_, "sample-", kCached + 2 * rounds, kChunk + 4096);
  StartServerAndRegister();
  Mount();
  if (HasFatalFailure()) return;
  ReadTally tally;
  for (int i = 0; i < kCached; ++i) ReadAndVerify(mounted_ + "/" + files[i].path, files[i], &tally);

  uint64_t failed_as_expected = 0;
  double slowest_recovery = 0;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    const SourceFile& by_grpc = files[kCached + 2 * round];
    const SourceFile& by_mount = files[kCached + 2 * round + 1];
    std::filesystem::rename(source_, source_ + ".gone");

    for (int i = 0; i < kCached; ++i) {
      ReadAndVerify(mounted_ + "/" + files[i].path, files[i], &tally);
    }
    ReadResult read = ReadFirstChunk(by_grpc);
    EXPECT_EQ(read.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(read.status.error_message().find(by_grpc.path), std::string::npos)
        << read.status.error_message();
    int error = ReadThroughMount(by_mount, &tally);
    EXPECT_EQ(error, ESTALE) << std::strerror(error);
    EXPECT_NE(mount_->log().find(by_mount.path), std::string::npos) << mount_->log();
    failed_as_expected += !read.status.ok() + (error != 0);

    std::filesystem::rename(source_ + ".gone", source_);
    slowest_recovery = std::max(slowest_recovery, SecondsUntilReadable(by_grpc));
    EXPECT_LT(slowest_recovery, kReadableAgainWithinSeconds);
    EXPECT_EQ(ReadThroughMount(by_mount, &tally), 0);
    ReadAndVerify(mounted_ + "/" + by_grpc.path, by_grpc, &tally);
  }
  EXPECT_EQ(failed_as_expected, 2u * rounds);
  EXPECT_EQ(tally.errors, 0u);
  EXPECT_EQ(tally.bytes_wrong, 0u);
  ReportFaultRow(
      {"Source directory gone mid-epoch, then back (uncached files read over gRPC and the mount)",
       rounds, tally,
       absl::StrFormat("%d reads failed as they should (FAILED_PRECONDITION / ESTALE naming the "
                       "file); back %.3f s after the source at worst, no restart",
                       failed_as_expected, slowest_recovery)});
}

TEST_F(SourceTest, SourceTurnsUnreadableAndReadableAgain) {
  if (::geteuid() != 0) GTEST_SKIP() << "running granaryd as another user needs root";
  const int rounds = EnvInt("GRANARY_FAULT_ROUNDS", 10);
  const std::vector<SourceFile> files = WriteSourceTree(source_, "sample-", 2 * rounds, kChunk);
  ::chmod(source_dir_.path().c_str(), 0755);
  GranarydOptions options;
  options.user = "nobody";  // Root reads any file whatever its mode.
  StartServerAndRegister(options);
  Mount();
  if (HasFatalFailure()) return;

  ReadTally tally;
  uint64_t failed_as_expected = 0;
  int read_after_chmod = 0;
  double slowest_recovery = 0;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    const SourceFile& by_grpc = files[2 * round];
    const SourceFile& by_mount = files[2 * round + 1];
    // Even rounds lock the file, odd rounds the whole source directory.
    const std::string locked = round % 2 == 0 ? source_ + "/" + by_grpc.path : source_;
    struct stat before;
    ASSERT_EQ(::stat(locked.c_str(), &before), 0);
    ASSERT_EQ(::chmod(locked.c_str(), 0), 0);

    ReadResult read = ReadFirstChunk(by_grpc);
    EXPECT_EQ(read.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_NE(read.status.error_message().find(by_grpc.path), std::string::npos)
        << read.status.error_message();
    failed_as_expected += !read.status.ok();
    // granary-fuse runs as root here: it reads the source itself when the
    // server cannot, so the reader gets the right bytes.
    EXPECT_EQ(ReadThroughMount(by_mount, &tally), 0);

    ASSERT_EQ(::chmod(locked.c_str(), before.st_mode & 07777), 0);
    if (locked != source_) {
      // A chmod changes the file's metadata alone (its ctime): its bytes
      // read at once, and granaryd refreshes the dataset to record it.
      ReadResult after = ReadFirstChunk(by_grpc);
      EXPECT_TRUE(after.status.ok()) << after.status.error_message();
      read_after_chmod += after.status.ok();
      continue;
    }
    slowest_recovery = std::max(slowest_recovery, SecondsUntilReadable(by_grpc));
    EXPECT_LT(slowest_recovery, kReadableAgainWithinSeconds);
    ReadAndVerify(mounted_ + "/" + by_grpc.path, by_grpc, &tally);
  }
  EXPECT_EQ(failed_as_expected, static_cast<uint64_t>(rounds));
  EXPECT_EQ(tally.errors, 0u);
  EXPECT_EQ(tally.bytes_wrong, 0u);
  ReportFaultRow(
      {"Source file or directory unreadable (granaryd as nobody), then readable again", rounds,
       tally,
       absl::StrFormat("%d gRPC reads failed as they should (PERMISSION_DENIED naming the file); "
                       "the mount (root) read the source itself; a directory's reads back %.3f "
                       "s after chmod at worst; %d chmodded files read back at once (a change "
                       "of metadata alone)",
                       failed_as_expected, slowest_recovery, read_after_chmod)});
}

}  // namespace
}  // namespace granary::testing
