// VerifiedSourceFile against files changed behind the manifest's back: a
// file replaced by another whose size and mtime are forged to match, a FIFO,
// a rewrite; changes of metadata alone (a chmod, a hard link), which still
// read and are told; and a plain read that matches.
#include "common/source_access/verified_source_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace granary {
namespace {

int64_t Nanoseconds(const struct timespec& time) {
  return int64_t{time.tv_sec} * 1'000'000'000 + time.tv_nsec;
}

class VerifiedSourceFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/granary-verified-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    root_ = pattern;
    std::ofstream(root_ + "/file") << "recorded";
    entry_ = Record("file");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // The manifest entry of `path` as the scanner would record it now.
  ManifestEntry Record(const std::string& path) {
    struct stat st;
    EXPECT_EQ(::lstat((root_ + "/" + path).c_str(), &st), 0) << path;
    ManifestEntry entry;
    entry.path = path;
    entry.size = static_cast<uint64_t>(st.st_size);
    entry.mode = st.st_mode;
    entry.mtime_ns = Nanoseconds(st.st_mtim);
    entry.uid = st.st_uid;
    entry.gid = st.st_gid;
    EXPECT_TRUE(entry.set_device(st.st_dev));
    entry.inode = st.st_ino;
    entry.ctime_ns = Nanoseconds(st.st_ctim);
    return entry;
  }

  // Waits until the file system's clock, which ticks at the kernel's timer
  // granularity, has moved past the recorded file's times, so that a change
  // made next shows in them: touches a scratch file until its times have.
  void WaitForTheFileClockToTick() {
    const std::string scratch = root_ + "/clock";
    std::ofstream(scratch).close();
    for (;;) {
      ASSERT_EQ(::utimensat(AT_FDCWD, scratch.c_str(), nullptr, 0), 0);
      const ManifestEntry now = Record("clock");
      if (now.ctime_ns > entry_.ctime_ns && now.mtime_ns > entry_.mtime_ns) return;
    }
  }

  // Expects the open of the recorded file refused, naming it and `what`.
  void ExpectStale(const std::string& what) {
    absl::StatusOr<VerifiedSourceFile> file = VerifiedSourceFile::Open(root_, entry_);
    ASSERT_FALSE(file.ok()) << "opened a file that is not the recorded one";
    EXPECT_EQ(file.status().code(), absl::StatusCode::kFailedPrecondition) << file.status();
    EXPECT_NE(file.status().message().find("'file'"), std::string_view::npos) << file.status();
    EXPECT_NE(file.status().message().find(what), std::string_view::npos) << file.status();
  }

  std::string root_;
  ManifestEntry entry_;
};

TEST_F(VerifiedSourceFileTest, ReadsTheRecordedFile) {
  absl::StatusOr<VerifiedSourceFile> file = VerifiedSourceFile::Open(root_, entry_);
  ASSERT_TRUE(file.ok()) << file.status();
  std::string bytes(4, '\0');
  ASSERT_TRUE(file->ReadExactly(2, bytes).ok());
  EXPECT_EQ(bytes, "cord");
}

TEST_F(VerifiedSourceFileTest, AnotherFileWithForgedSizeAndMtimeIsRefused) {
  std::ofstream(root_ + "/forged") << "FORGED!!";
  struct timespec times[2] = {{0, UTIME_OMIT},
                              {entry_.mtime_ns / 1'000'000'000, entry_.mtime_ns % 1'000'000'000}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (root_ + "/forged").c_str(), times, 0), 0);
  std::filesystem::rename(root_ + "/forged", root_ + "/file");
  ManifestEntry now = Record("file");
  ASSERT_EQ(now.size, entry_.size);
  ASSERT_EQ(now.mtime_ns, entry_.mtime_ns);
  ExpectStale("inode");
}

TEST_F(VerifiedSourceFileTest, ReadsTheRecordedFileAsUnchanged) {
  absl::StatusOr<VerifiedSourceFile> file = VerifiedSourceFile::Open(root_, entry_);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_FALSE(file->metadata_changed());
}

TEST_F(VerifiedSourceFileTest, AChmodOrAHardLinkChangesMetadataOnlyAndStillReads) {
  ASSERT_NO_FATAL_FAILURE(WaitForTheFileClockToTick());
  ASSERT_EQ(::chmod((root_ + "/file").c_str(), 0600), 0);
  ASSERT_EQ(::link((root_ + "/file").c_str(), (root_ + "/link").c_str()), 0);
  ASSERT_NE(Record("file").ctime_ns, entry_.ctime_ns);
  absl::StatusOr<VerifiedSourceFile> file = VerifiedSourceFile::Open(root_, entry_);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(file->metadata_changed());
  std::string bytes(8, '\0');
  ASSERT_TRUE(file->ReadExactly(0, bytes).ok());
  EXPECT_EQ(bytes, "recorded");
}

TEST_F(VerifiedSourceFileTest, ARewriteOfTheSameSizeIsRefused) {
  ASSERT_NO_FATAL_FAILURE(WaitForTheFileClockToTick());
  std::ofstream(root_ + "/file", std::ios::in | std::ios::out) << "REWRITE!";
  ExpectStale("mtime_ns");
}

TEST_F(VerifiedSourceFileTest, AFifoInPlaceOfTheFileIsRefusedWithoutBlocking) {
  std::filesystem::remove(root_ + "/file");
  ASSERT_EQ(::mkfifo((root_ + "/file").c_str(), 0644), 0);
  ExpectStale("no longer a regular file");
}

TEST_F(VerifiedSourceFileTest, AFileChangedAfterTheOpenFailsItsNextRead) {
  absl::StatusOr<VerifiedSourceFile> file = VerifiedSourceFile::Open(root_, entry_);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_NO_FATAL_FAILURE(WaitForTheFileClockToTick());
  std::ofstream(root_ + "/file", std::ios::in | std::ios::out) << "REWRITE!";
  std::string bytes(8, '\0');
  absl::Status read = file->ReadExactly(0, bytes);
  EXPECT_EQ(read.code(), absl::StatusCode::kFailedPrecondition) << read;
}

}  // namespace
}  // namespace granary
