// Older dataset versions across refreshes, over a real granaryd and a real
// mount with short grace periods: a file opened before a refresh keeps
// reading its version through the grace periods and after them (the source's
// unchanged files whole, the cached parts of changed ones; the rest ESTALE),
// an open directory holds its version too, and once nothing holds it the
// version is released by granary-fuse and then by granaryd; names the kernel
// still caches of a released version answer ESTALE.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/dataset/chunk_key.h"
#include "grpcpp/client_context.h"
#include "tests/fuse/mounted_tree.h"

namespace granary::testing {
namespace {

constexpr int kServerGraceSeconds = 3;
constexpr int kMountGraceSeconds = 1;
// Past both grace periods and the mount's 2 s refresh of the dataset list.
constexpr std::chrono::seconds kPastTheGraces{kServerGraceSeconds + kMountGraceSeconds + 3};
// Larger than the readahead of the kernel and of granary-fuse, so that its
// end is not read before a test reads it.
constexpr size_t kBigFile = 48 * kChunk;

class VersionReleaseTest : public MountedTree {
 protected:
  void BuildTree() override {
    WriteFile(source_ + "/kept.bin", RandomBytes(kBigFile, 1));
    WriteFile(source_ + "/changed.bin", RandomBytes(kBigFile, 2));
    for (int i = 0; i < 20; ++i) {
      WriteFile(source_ + "/samples/s" + std::to_string(i), RandomBytes(1000 + i, 100 + i));
    }
  }
  // Every read goes through granary-fuse, none passed through to the
  // kernel, so that what is cached is what the test read.
  std::vector<std::string> MountArgs() const override {
    return {"--no-passthrough", "--version-grace-seconds", std::to_string(kMountGraceSeconds)};
  }
  std::vector<std::string> ServerArgs() const override {
    return {"--version-grace-seconds", std::to_string(kServerGraceSeconds)};
  }

  v1::DatasetInfo Dataset() {
    v1::GetDatasetRequest request;
    request.set_name("ds");
    v1::DatasetInfo info;
    grpc::ClientContext context;
    grpc::Status status = server_->SocketStub()->GetDataset(&context, request, &info);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return info;
  }

  // Changes changed.bin in the source, adds `marker` and refreshes; returns
  // once the mount shows the new version.
  void ChangeAndRefresh(const std::string& marker) {
    WriteFile(source_ + "/changed.bin", RandomBytes(kBigFile, 3));
    struct timeval times[2] = {{2000, 0}, {2000, 0}};
    ASSERT_EQ(utimes((source_ + "/changed.bin").c_str(), times), 0);
    WriteFile(source_ + "/" + marker, marker);
    v1::RefreshDatasetRequest request;
    request.set_name("ds");
    v1::DatasetInfo refreshed;
    grpc::ClientContext context;
    ASSERT_TRUE(server_->SocketStub()->RefreshDataset(&context, request, &refreshed).ok());
    ASSERT_EQ(refreshed.older_versions_size(), 1);
    bool shown = false;
    for (int i = 0; i < 100 && !shown; ++i) {
      shown = ReadWhole(mounted_ + "/" + marker) == marker;
      if (!shown) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_TRUE(shown) << "the mount never showed the new version";
  }

  // Waits until granaryd lists no older version; false if it still does
  // after `timeout`.
  bool OlderVersionsReleased(std::chrono::seconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (Dataset().older_versions_size() > 0) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return true;
  }

  std::string Pread(int fd, size_t length, uint64_t offset) {
    std::string buffer(length, '\0');
    ssize_t n = pread(fd, buffer.data(), length, static_cast<off_t>(offset));
    if (n < 0) return "error: " + std::string(std::strerror(errno));
    buffer.resize(static_cast<size_t>(n));
    return buffer;
  }
};

TEST_F(VersionReleaseTest, OpenFilesAndDirectoriesKeepTheirVersionUntilClosedThenItIsReleased) {
  const std::string kept = RandomBytes(kBigFile, 1);
  const std::string old_changed = RandomBytes(kBigFile, 2);
  const uint64_t old_version = Dataset().version();
  int kept_fd = open((mounted_ + "/kept.bin").c_str(), O_RDONLY);
  int changed_fd = open((mounted_ + "/changed.bin").c_str(), O_RDONLY);
  ASSERT_GE(kept_fd, 0);
  ASSERT_GE(changed_fd, 0);
  ASSERT_EQ(Pread(changed_fd, 4096, 0), old_changed.substr(0, 4096));
  DIR* samples = opendir((mounted_ + "/samples").c_str());
  ASSERT_NE(samples, nullptr);

  ASSERT_NO_FATAL_FAILURE(ChangeAndRefresh("added"));
  std::this_thread::sleep_for(kPastTheGraces);
  EXPECT_EQ(Dataset().older_versions_size(), 1) << "released with files open";
  EXPECT_EQ(mount_->log().find("released dataset"), std::string::npos) << mount_->log();

  // The old version's unchanged file reads whole, also what was never read.
  EXPECT_TRUE(Pread(kept_fd, kChunk, 40 * kChunk) == kept.substr(40 * kChunk, kChunk));
  // Of the changed file, what was read before stays; the rest is gone from
  // the source and reads as ESTALE, never as the new bytes.
  EXPECT_EQ(Pread(changed_fd, 4096, 0), old_changed.substr(0, 4096));
  EXPECT_EQ(Pread(changed_fd, 4096, 44 * kChunk), "error: " + std::string(std::strerror(ESTALE)));
  // The open directory lists the old version in full.
  int listed = 0;
  while (dirent* entry = readdir(samples)) listed += entry->d_name[0] != '.';
  EXPECT_EQ(listed, 20);
  // New opens get the new version.
  EXPECT_TRUE(ReadWhole(mounted_ + "/changed.bin") == RandomBytes(kBigFile, 3));

  close(changed_fd);
  std::this_thread::sleep_for(kPastTheGraces);
  EXPECT_EQ(Dataset().older_versions_size(), 1) << "released with a file and a directory open";
  EXPECT_TRUE(Pread(kept_fd, kChunk, 0) == kept.substr(0, kChunk));
  close(kept_fd);
  closedir(samples);

  EXPECT_TRUE(OlderVersionsReleased(std::chrono::seconds(30))) << server_->log();
  EXPECT_NE(mount_->log().find("released dataset 'ds' version " + FormatVersion(old_version)),
            std::string::npos)
      << mount_->log();
  EXPECT_NE(server_->log().find("released version " + FormatVersion(old_version)),
            std::string::npos)
      << server_->log();
}

TEST_F(VersionReleaseTest, NamesTheKernelCachesOfAReleasedVersionAnswerEstale) {
  // A descriptor that never opens the directory through FUSE, so it holds
  // nothing: the kernel keeps the old version's entries behind it.
  int old_dir = open((mounted_ + "/samples").c_str(), O_PATH | O_DIRECTORY);
  ASSERT_GE(old_dir, 0);
  struct stat st;
  ASSERT_EQ(fstatat(old_dir, "s1", &st, 0), 0);
  ASSERT_EQ(ReadWhole(mounted_ + "/samples/s1"), RandomBytes(1001, 101));

  ASSERT_NO_FATAL_FAILURE(ChangeAndRefresh("added"));
  // Nothing holds the old version: it goes after the graces.
  EXPECT_TRUE(OlderVersionsReleased(std::chrono::seconds(30))) << server_->log();
  ASSERT_NE(mount_->log().find("released dataset 'ds'"), std::string::npos) << mount_->log();

  EXPECT_EQ(openat(old_dir, "s1", O_RDONLY), -1);
  EXPECT_EQ(errno, ESTALE) << std::strerror(errno);
  EXPECT_EQ(fstatat(old_dir, "s2", &st, 0), -1) << "s2 was never looked up";
  EXPECT_EQ(errno, ESTALE) << std::strerror(errno);
  close(old_dir);
  // The mount serves the new version as before.
  EXPECT_EQ(ReadWhole(mounted_ + "/samples/s1"), RandomBytes(1001, 101));
  EXPECT_EQ(ReadWhole(mounted_ + "/added"), "added");
  EXPECT_EQ(stat(mount_->path().c_str(), &st), 0);
}

// A removed dataset's files, still reachable through a directory held open,
// are stale names (ESTALE), not files the caller lacks permission for: the
// soak (tests/soak) saw EACCES from opens racing a removal.
TEST_F(VersionReleaseTest, AFileOfARemovedDatasetOpensAsStaleNotDenied) {
  DIR* samples = opendir((mounted_ + "/samples").c_str());
  ASSERT_NE(samples, nullptr);
  v1::RemoveDatasetRequest request;
  request.set_name("ds");
  v1::RemoveDatasetResponse response;
  grpc::ClientContext context;
  ASSERT_TRUE(server_->SocketStub()->RemoveDataset(&context, request, &response).ok());
  struct stat st;
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = stat(mounted_.c_str(), &st) != 0 && errno == ENOENT;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(gone) << "the mount still shows the removed dataset";

  EXPECT_EQ(openat(dirfd(samples), "s1", O_RDONLY), -1);
  EXPECT_EQ(errno, ESTALE) << std::strerror(errno);
  closedir(samples);
}

}  // namespace
}  // namespace granary::testing
