// Cgroup v2 directories a test makes for the jobs it runs (named as Slurm
// names a job's, `job_<id>`, or as Kubernetes' systemd driver names a pod's
// slice), all beneath one directory of the test's own, removed when the
// TestCgroups is destroyed (their processes must have exited by then).
// available() is false on a host with no writable cgroup v2 hierarchy.
//
// Thread-safety: not thread-safe; use one object from one thread.
#ifndef GRANARY_TESTS_JOBS_TEST_CGROUPS_H_
#define GRANARY_TESTS_JOBS_TEST_CGROUPS_H_

#include <string>
#include <vector>

namespace granary::testing {

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

  std::string base_;
  std::vector<std::string> made_;
};

}  // namespace granary::testing

#endif  // GRANARY_TESTS_JOBS_TEST_CGROUPS_H_
