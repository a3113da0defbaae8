#include "tests/fuse/fuse_mount.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
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
  mount->args_ = {mount->mountpoint_, "--foreground", "--server", server};
  mount->args_.insert(mount->args_.end(), extra_args.begin(), extra_args.end());
  mount->ready_path_ = mount->mountpoint_ + "/" + ready_path;
  GRANARY_RETURN_IF_ERROR(mount->Spawn(timeout));
  return mount;
}

absl::Status FuseMount::Spawn(std::chrono::milliseconds timeout,
                              const std::vector<std::string>& extra) {
  std::vector<std::string> args = args_;
  args.insert(args.end(), extra.begin(), extra.end());
  GRANARY_ASSIGN_OR_RETURN(pid_, SpawnChild(GranaryFusePath(), args, log_path_));
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    // statfs() reaches granary-fuse; stat() could be answered by the kernel's
    // cache of a mount whose process died.
    struct statfs fs;
    if (statfs(ready_path_.c_str(), &fs) == 0) return absl::OkStatus();
    if (!Running()) {
      return absl::InternalError(
          absl::StrCat("granary-fuse exited before the mount was ready: ", log()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat(ready_path_, " did not appear in time; granary-fuse log: ", log()));
}

void FuseMount::Kill() {
  KillChild(pid_);
  pid_ = -1;
}

absl::Status FuseMount::Terminate(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return absl::FailedPreconditionError("granary-fuse is not running");
  ::kill(pid_, SIGTERM);
  if (!WaitForExit(pid_, timeout).has_value()) {
    return absl::DeadlineExceededError("granary-fuse did not exit after SIGTERM");
  }
  pid_ = -1;
  return absl::OkStatus();
}

absl::Status FuseMount::Restart(std::chrono::milliseconds timeout) {
  Kill();
  return Spawn(timeout);
}

absl::Status FuseMount::TakeOver(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return absl::FailedPreconditionError("granary-fuse is not running");
  const pid_t old = pid_;
  GRANARY_RETURN_IF_ERROR(Spawn(timeout, {"--takeover"}));
  std::optional<int> status = WaitForExit(old, timeout);
  if (!status.has_value()) {
    KillChild(old);
    return absl::DeadlineExceededError("the granary-fuse taken over from did not exit");
  }
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    return absl::InternalError(absl::StrCat(
        "the granary-fuse taken over from did not exit 0 (wait status ", *status, "): ", log()));
  }
  return absl::OkStatus();
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
