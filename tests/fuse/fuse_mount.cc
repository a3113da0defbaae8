#include "tests/fuse/fuse_mount.h"

#include <sys/stat.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "tests/support/child_process.h"

namespace granary::testing {
namespace {

int RunQuietly(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str());
}

}  // namespace

std::string GranaryFusePath() { return GRANARY_TEST_FUSE_PATH; }

absl::StatusOr<std::unique_ptr<FuseMount>> FuseMount::Start(
    const std::string& server, const std::vector<std::string>& extra_args,
    const std::string& ready_path, std::chrono::milliseconds timeout) {
  std::unique_ptr<FuseMount> mount(new FuseMount());
  mount->mountpoint_ = mount->temp_.path() + "/mnt";
  mount->log_path_ = mount->temp_.path() + "/granary-fuse.log";
  if (mkdir(mount->mountpoint_.c_str(), 0755) != 0) return ErrnoStatus(errno, "mkdir mount point");

  std::vector<std::string> args = {mount->mountpoint_, "--foreground", "--server", server};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  GRANARY_ASSIGN_OR_RETURN(mount->pid_, SpawnChild(GranaryFusePath(), args, mount->log_path_));

  const std::string ready = mount->mountpoint_ + "/" + ready_path;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    struct stat st;
    if (stat(ready.c_str(), &st) == 0) return mount;
    if (!mount->Running()) {
      return absl::InternalError(
          absl::StrCat("granary-fuse exited before the mount was ready: ", mount->log()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat(ready, " did not appear in time; granary-fuse log: ", mount->log()));
}

FuseMount::~FuseMount() { ForceUnmount(); }

void FuseMount::ForceUnmount() {
  if (RunQuietly("fusermount3 -u '" + mountpoint_ + "'") != 0) {
    RunQuietly("fusermount3 -uz '" + mountpoint_ + "'");
  }
  if (pid_ > 0) {
    for (int i = 0; i < 100 && Running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    KillChild(pid_);
    pid_ = -1;
  }
}

bool FuseMount::Running() {
  if (pid_ <= 0) return false;
  int status;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

absl::StatusOr<int> FuseMount::Unmount() {
  if (RunQuietly("fusermount3 -u '" + mountpoint_ + "'") != 0) {
    return absl::InternalError(absl::StrCat("fusermount3 -u ", mountpoint_, " failed"));
  }
  if (pid_ <= 0) return absl::FailedPreconditionError("granary-fuse is not running");
  int status;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string FuseMount::log() const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace granary::testing
