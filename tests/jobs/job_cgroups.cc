#include "tests/jobs/job_cgroups.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "tests/fuse/mounted_tree.h"

namespace granary::testing {

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

TestCgroups::TestCgroups() : root_(CgroupV2Root()) {
  if (!root_.empty()) base_ = absl::StrCat(root_, "/granary-jobs-test-", ::getpid());
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

std::pair<int, std::string> RunInCgroup(const std::string& cgroup, uid_t uid,
                                        const std::string& command) {
  std::string script;
  if (!cgroup.empty()) script = absl::StrCat("echo $$ > ", cgroup, "/cgroup.procs && ");
  if (uid != 0) {
    absl::StrAppend(&script, "exec timeout 60 setpriv --reuid=", uid, " --regid=", uid,
                    " --clear-groups ");
  } else {
    absl::StrAppend(&script, "exec timeout 60 ");
  }
  absl::StrAppend(&script, command);
  return Shell(absl::StrCat("sh -c '", script, "'"));
}

}  // namespace granary::testing
