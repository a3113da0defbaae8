// What the jobs tests share to read as a job does: cgroup v2 directories
// made as Slurm and Kubernetes name a job's (TestCgroups), and commands run
// from inside one as a given user (RunInCgroup).
//
// Thread-safety: a TestCgroups belongs to its test; RunInCgroup is reentrant.
#ifndef GRANARY_TESTS_JOBS_JOB_CGROUPS_H_
#define GRANARY_TESTS_JOBS_JOB_CGROUPS_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace granary::testing {

inline constexpr uid_t kNobody = 65534;

// Where this host lets the test make cgroup v2 directories: the unified
// hierarchy of a hybrid host, else the root of a v2-only one; empty if none.
std::string CgroupV2Root();

// Cgroups made beneath one directory of the test's own, removed at the end
// (their processes have exited by then).
class TestCgroups {
 public:
  TestCgroups();
  ~TestCgroups();
  TestCgroups(const TestCgroups&) = delete;
  TestCgroups& operator=(const TestCgroups&) = delete;

  bool available() const { return !base_.empty(); }

  // The directory of cgroup `relative` (created with its parents).
  std::string Make(const std::string& relative);
  // Removes cgroup `relative`, made by Make() and empty by now; true if it
  // is gone.
  bool Remove(const std::string& relative);

 private:
  void MakeOne(const std::string& path);

  const std::string root_;
  std::string base_;
  std::vector<std::string> made_;
};

// Exit code and output of `sh -c` that moves itself into cgroup `cgroup`
// (unless empty), then runs `command` as user `uid` (root: as it is), for at
// most a minute (a read that hangs fails the test instead of stalling it).
std::pair<int, std::string> RunInCgroup(const std::string& cgroup, uid_t uid,
                                        const std::string& command);

}  // namespace granary::testing

#endif  // GRANARY_TESTS_JOBS_JOB_CGROUPS_H_
