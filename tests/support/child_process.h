// Child processes for integration tests: fork and exec a real binary with its
// output appended to a log file, wait for it with a timeout, kill it. A child
// dies with the test process (PR_SET_PDEATHSIG), so a crashed test leaves no
// servers behind.
//
// Thread-safety: functions of their arguments; call from one test thread.
#ifndef GRANARY_TESTS_SUPPORT_CHILD_PROCESS_H_
#define GRANARY_TESTS_SUPPORT_CHILD_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace granary::testing {

// Starts `binary` with `args`; stdin is /dev/null, stdout and stderr go to
// `log_path` (appended).
absl::StatusOr<pid_t> SpawnChild(const std::string& binary, const std::vector<std::string>& args,
                                 const std::string& log_path);

// Waits up to `timeout` for `pid` to exit; its raw wait status, or nullopt.
std::optional<int> WaitForExit(pid_t pid, std::chrono::milliseconds timeout);

// SIGKILLs and reaps `pid`.
void KillChild(pid_t pid);

}  // namespace granary::testing

#endif  // GRANARY_TESTS_SUPPORT_CHILD_PROCESS_H_
