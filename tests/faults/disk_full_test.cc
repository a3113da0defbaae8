// The filesystem of granaryd's cache directory fills up (a 96 MiB tmpfs that
// another writer fills): reads through the mount keep flowing from the source
// with no error and no wrong byte, granaryd stays up with a bounded number of
// open files, says so in its log and counts the chunks it could not store;
// once space is freed it stores chunks again, without a restart.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tests/faults/fault_fixture.h"

namespace granary::testing {
namespace {

// A tmpfs of `size` mounted on a fresh directory, unmounted by the destructor.
class SmallFilesystem {
 public:
  explicit SmallFilesystem(const std::string& size) {
    ::mkdir(path_.c_str(), 0755);
    mounted_ = ::mount("tmpfs", path_.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
  }
  ~SmallFilesystem() {
    if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& path() const { return path_; }

 private:
  TempDir temp_;
  std::string path_ = temp_.path() + "/fs";
  bool mounted_ = false;
};

// Writes `path` until the filesystem is full.
void FillWith(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  const std::string block(1 << 20, 'x');
  while (::write(fd, block.data(), block.size()) > 0) {
  }
  EXPECT_EQ(errno, ENOSPC);
  ::close(fd);
}

// What descriptors of files (not sockets: readers' connections to the local
// read socket come and go with how many reads run at once) lead to.
std::vector<std::string> OpenFiles(pid_t pid) {
  std::vector<std::string> files;
  std::error_code error;
  for (const auto& entry :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/fd"))) {
    std::string target = std::filesystem::read_symlink(entry.path(), error).string();
    if (!target.starts_with("socket:")) files.push_back(std::move(target));
  }
  return files;
}

class DiskFullTest : public FaultTest {};

TEST_F(DiskFullTest, ReadsFlowFromTheSourceAndCachingResumesWhenSpaceReturns) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
  SmallFilesystem cache_fs("96m");
  ASSERT_TRUE(cache_fs.mounted()) << std::strerror(errno);
  const std::vector<SourceFile> files = WriteSourceTree(source_, "img-", 100, 2 * kChunk);
  GranarydOptions options;
  options.extra_args = {"--cache-dir", cache_fs.path() + "/granary", "--capacity", "64MiB"};
  StartServerAndRegister(options);
  // A small client cache, so that reads keep reaching the server.
  Mount({"--cache-size", "8MiB"});
  if (HasFatalFailure()) return;

  FillWith(cache_fs.path() + "/other-tenant");
  const std::vector<std::string> open_files = OpenFiles(server_->pid());
  ReaderPool readers(mounted_, files, 4, /*seed=*/3);
  std::this_thread::sleep_for(std::chrono::seconds(EnvInt("GRANARY_DISK_FULL_SECONDS", 4)));
  const double failed = Metric("granary_store_insert_errors_total");
  EXPECT_GT(failed, 0);
  EXPECT_TRUE(server_->running());
  // Each of the 4 readers' reads in flight may hold a source file, a copy in
  // memory and two data files, and the store a ring more; a leak would hold
  // one more for each of the hundreds of chunks not stored.
  const std::vector<std::string> open_now = OpenFiles(server_->pid());
  EXPECT_LE(open_now.size(), open_files.size() + 20)
      << "granaryd leaks files on a full disk: " << absl::StrJoin(open_files, " ") << " -> "
      << absl::StrJoin(open_now, " ");
  EXPECT_NE(server_->log().find("No space left on device"), std::string::npos) << server_->log();

  // Space returns: chunks are stored again without a restart.
  const double stored = Metric("granary_store_chunks");
  std::filesystem::remove(cache_fs.path() + "/other-tenant");
  Clock::time_point freed = Clock::now();
  while (Metric("granary_store_chunks") <= stored && SecondsSince(freed) < 20) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double recovery = SecondsSince(freed);
  EXPECT_GT(Metric("granary_store_chunks"), stored);
  // The next store after space returns succeeds: no backoff to wait out.
  EXPECT_LT(recovery, 5.0);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  readers.Stop();

  ReadTally tally = readers.Tally();
  EXPECT_EQ(tally.errors, 0u) << tally.first_errors.front();
  EXPECT_EQ(tally.bytes_wrong, 0u);
  EXPECT_GT(tally.reads_verified, 0u);
  ReportFaultRow({"Cache directory's filesystem full (tmpfs filled by another writer)", 1, tally,
                  absl::StrFormat("reads never failed (%.0f chunks not stored); caching resumed "
                                  "%.2f s after space was freed",
                                  failed, recovery)});
}

}  // namespace
}  // namespace granary::testing
