// OpenBeneath, both by openat2 and by the walk it falls back to: a symlink at
// any component, a "..", an absolute path are refused; a plain path opens.
#include "common/source_access/source_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace granary {
namespace {

using OpenFunction = absl::StatusOr<UniqueFd> (*)(int, std::string_view, int);

std::string ReadAll(int fd) {
  std::string text;
  char buffer[256];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof(buffer))) > 0) text.append(buffer, static_cast<size_t>(n));
  return text;
}

// root/a/b/file holds "inside"; outside/file, next to root, holds "outside".
// Symlinks: root/first -> a (first component), root/a/middle -> b (a middle
// one), root/a/b/last -> file (the last one), root/escape -> ../outside.
class OpenBeneathTest : public ::testing::TestWithParam<OpenFunction> {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/granary-source-path-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    base_ = pattern;
    const std::string root = base_ + "/root";
    std::filesystem::create_directories(root + "/a/b");
    std::filesystem::create_directories(base_ + "/outside");
    std::ofstream(root + "/a/b/file") << "inside";
    std::ofstream(base_ + "/outside/file") << "outside";
    std::filesystem::create_directory_symlink("a", root + "/first");
    std::filesystem::create_directory_symlink("b", root + "/a/middle");
    std::filesystem::create_symlink("file", root + "/a/b/last");
    std::filesystem::create_directory_symlink("../outside", root + "/escape");
    root_fd_ = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(root_fd_, 0);
  }
  void TearDown() override {
    ::close(root_fd_);
    std::filesystem::remove_all(base_);
  }

  absl::StatusOr<UniqueFd> Open(std::string_view path, int flags = O_RDONLY) {
    return GetParam()(root_fd_, path, flags);
  }

  // Expects `path` refused with `code`, naming the path.
  void ExpectRefused(std::string_view path, absl::StatusCode code, int flags = O_RDONLY) {
    absl::StatusOr<UniqueFd> fd = Open(path, flags);
    ASSERT_FALSE(fd.ok()) << path << " opened";
    EXPECT_EQ(fd.status().code(), code) << path << ": " << fd.status();
    EXPECT_NE(std::string(fd.status().message()).find(path), std::string::npos) << fd.status();
  }

  std::string base_;
  int root_fd_ = -1;
};

TEST_P(OpenBeneathTest, OpensAPlainPath) {
  absl::StatusOr<UniqueFd> fd = Open("a/b/file");
  ASSERT_TRUE(fd.ok()) << fd.status();
  EXPECT_EQ(ReadAll(fd->get()), "inside");
  absl::StatusOr<UniqueFd> dir = Open("a/b", O_RDONLY | O_DIRECTORY);
  ASSERT_TRUE(dir.ok()) << dir.status();
  struct stat st;
  ASSERT_EQ(::fstat(dir->get(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
}

TEST_P(OpenBeneathTest, RefusesASymlinkAtTheFirstComponent) {
  ExpectRefused("first/b/file", absl::StatusCode::kFailedPrecondition);
}

TEST_P(OpenBeneathTest, RefusesASymlinkAtAMiddleComponent) {
  ExpectRefused("a/middle/file", absl::StatusCode::kFailedPrecondition);
}

TEST_P(OpenBeneathTest, RefusesASymlinkAtTheLastComponent) {
  ExpectRefused("a/b/last", absl::StatusCode::kFailedPrecondition);
  ExpectRefused("a/middle", absl::StatusCode::kFailedPrecondition, O_RDONLY | O_DIRECTORY);
}

TEST_P(OpenBeneathTest, RefusesASymlinkLeavingTheRoot) {
  ExpectRefused("escape/file", absl::StatusCode::kFailedPrecondition);
}

TEST_P(OpenBeneathTest, RefusesDotDotEvenWhenItStaysInside) {
  ExpectRefused("../outside/file", absl::StatusCode::kFailedPrecondition);
  ExpectRefused("a/../a/b/file", absl::StatusCode::kFailedPrecondition);
}

TEST_P(OpenBeneathTest, RefusesAnAbsolutePath) {
  ExpectRefused(base_ + "/outside/file", absl::StatusCode::kFailedPrecondition);
}

TEST_P(OpenBeneathTest, MissingOrUncleanPaths) {
  ExpectRefused("a/missing", absl::StatusCode::kNotFound);
  ExpectRefused("a/b/file/under_a_file", absl::StatusCode::kNotFound);
  ExpectRefused("a//b/file", absl::StatusCode::kInvalidArgument);
  ExpectRefused("a/./b/file", absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Open("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Open(std::string_view("a/b/file\0x", 10)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(BothWays, OpenBeneathTest,
                         ::testing::Values(&OpenBeneath, &OpenBeneathByWalk),
                         [](const ::testing::TestParamInfo<OpenFunction>& info) {
                           return info.param == &OpenBeneath ? "Openat2" : "Walk";
                         });

}  // namespace
}  // namespace granary
