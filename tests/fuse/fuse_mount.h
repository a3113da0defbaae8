// FuseMount runs a real `granary-fuse --foreground` child process on a fresh
// mount point for integration tests and benchmarks. Start() returns once the
// mount shows `ready_path` (e.g. a dataset directory). The destructor always
// leaves no mount behind: `fusermount3 -u`, then `fusermount3 -uz` if that
// fails, then SIGKILL of a process still running.
//
// Thread-safety: not thread-safe; use one object from one thread.
#ifndef GRANARY_TESTS_FUSE_FUSE_MOUNT_H_
#define GRANARY_TESTS_FUSE_FUSE_MOUNT_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {

// Absolute path of the granary-fuse binary this test was built with.
std::string GranaryFusePath();

class FuseMount {
 public:
  static absl::StatusOr<std::unique_ptr<FuseMount>> Start(
      const std::string& server, const std::vector<std::string>& extra_args,
      const std::string& ready_path, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  ~FuseMount();
  FuseMount(const FuseMount&) = delete;
  FuseMount& operator=(const FuseMount&) = delete;

  const std::string& path() const { return mountpoint_; }
  pid_t pid() const { return pid_; }
  // Everything granary-fuse wrote to stderr so far.
  std::string log() const;
  // True while the process runs.
  bool Running();
  // `fusermount3 -u`; then waits for the process to exit and returns its exit
  // code (-1 if killed by a signal).
  absl::StatusOr<int> Unmount();
  // SIGKILLs granary-fuse as a crash would, leaving its mount behind.
  void Kill();
  // SIGTERMs granary-fuse and waits up to `timeout` for it to unmount and exit.
  absl::Status Terminate(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Starts granary-fuse again, with the same arguments, on the same mount
  // point, whatever the last one left there (SIGKILLing one still running);
  // returns once `ready_path` shows. A mount whose granary-fuse was killed
  // is taken over (its connection keeper holds it).
  absl::Status Restart(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Starts another granary-fuse with --takeover while this one runs, as an
  // upgrade would; returns once the old one has handed the mount over and
  // exited (its exit code must be 0) and the new one serves `ready_path`.
  absl::Status TakeOver(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Unmounts (lazily if busy) and stops granary-fuse, as the destructor does:
  // calls blocked on the mount then fail.
  void ForceUnmount();

 private:
  FuseMount() = default;
  absl::Status Spawn(std::chrono::milliseconds timeout, const std::vector<std::string>& extra = {});

  TempDir temp_;
  std::string mountpoint_;
  std::string log_path_;
  std::vector<std::string> args_;
  std::string ready_path_;
  pid_t pid_ = -1;
};

}  // namespace granary::testing

#endif  // GRANARY_TESTS_FUSE_FUSE_MOUNT_H_
