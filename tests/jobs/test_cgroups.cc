#include "tests/jobs/test_cgroups.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace granary::testing {
namespace {

// Where this host lets the test make cgroup v2 directories: the unified
// hierarchy of a hybrid host, else the root of a v2-only one.
std::string CgroupV2Root() {
  for (const char* root : {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}) {
    std::error_code error;
    if (std::filesystem::exists(absl::StrCat(root, "/cgroup.procs"), error) &&
        std::filesystem::exists(absl::StrCat(root, "/cgroup.controllers"), error) &&
        ::access(root, W_OK) == 0) {
      return root;
    }
  }
  return "";
}

}  // namespace

TestCgroups::TestCgroups() {
  const std::string root = CgroupV2Root();
  if (!root.empty()) base_ = absl::StrCat(root, "/granary-jobs-test-", ::getpid());
}

TestCgroups::~TestCgroups() {
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) ::rmdir(it->c_str());
}

std::string TestCgroups::Make(const std::string& relative) {
  std::string path = base_;
  MakeOne(path);
  for (const auto& part : std::filesystem::path(relative)) {
    absl::StrAppend(&path, "/", part.string());
    MakeOne(path);
  }
  return path;
}

bool TestCgroups::Remove(const std::string& relative) {
  const std::string path = absl::StrCat(base_, "/", relative);
  if (::rmdir(path.c_str()) != 0) return false;
  made_.erase(std::remove(made_.begin(), made_.end(), path), made_.end());
  return true;
}

void TestCgroups::MakeOne(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0) made_.push_back(path);
}

}  // namespace granary::testing
