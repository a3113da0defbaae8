// The job a process belongs to, as its cgroup says: every read Granary serves
// is attributed to one (DESIGN.md, "Jobs").
//
//  - A Slurm job: a path component `job_<id>` (Slurm's cgroup v1 and v2
//    plugins both place a job's steps beneath one): "slurm:<id>".
//  - A Kubernetes pod: a path beneath "kubepods" naming the pod, as the
//    cgroupfs driver does (`pod<uid>`) or the systemd one
//    (`kubepods-besteffort-pod<uid with _ for ->.slice`): "pod:<uid>".
//  - Anything else: the caller's uid, "uid:<n>".
// Every line of /proc/<pid>/cgroup is looked at (v1 hierarchies and the v2
// "0::" line alike); the first line naming a job decides.
//
// JobIdentifier caches the answer per process, so a reader's opens cost one
// read of /proc the first time and a hash lookup after; an answer is kept
// for kRemembered (a process may be moved into its job's cgroup after it
// started, and pids are reused), and the cache holds at most kMaxProcesses
// entries, so memory stays bounded whatever the number of processes.
//
// Thread-safety: JobOfCgroups() and ValidateJobName() are pure functions; JobIdentifier may be
// used concurrently.
#ifndef GRANARY_COMMON_JOBS_JOB_IDENTITY_H_
#define GRANARY_COMMON_JOBS_JOB_IDENTITY_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/base/mutex.h"

namespace granary {

// OK when `job` is a name JobOfCgroups gives; INVALID_ARGUMENT naming it and
// the forms it may take otherwise.
absl::Status ValidateJobName(std::string_view job);

// The job named by `cgroups` (the text of /proc/<pid>/cgroup) of a process
// run by `uid`.
std::string JobOfCgroups(std::string_view cgroups, uid_t uid);

class JobIdentifier {
 public:
  static constexpr std::chrono::seconds kRemembered{10};
  static constexpr size_t kMaxProcesses = 4096;

  // `proc` is where /proc is (tests point it elsewhere).
  explicit JobIdentifier(std::string proc = "/proc") : proc_(std::move(proc)) {}

  // The job of process (or thread) `pid`, run by `uid`: "uid:<uid>" when its
  // cgroup cannot be read (it exited, or pid is 0 as for a kernel request).
  std::string JobOf(pid_t pid, uid_t uid);

 private:
  struct Known {
    std::string job;
    uid_t uid;
    std::chrono::steady_clock::time_point found_at;
  };

  const std::string proc_;
  Mutex mutex_;
  absl::flat_hash_map<pid_t, Known> known_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace granary

#endif  // GRANARY_COMMON_JOBS_JOB_IDENTITY_H_
