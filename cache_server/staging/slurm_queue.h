// SlurmQueue reads what a Slurm controller plans for its jobs, through
// scontrol: each job's state, partition, nodes (planned by the backfill
// scheduler while it pends, SchedNodeList; allocated once it runs, NodeList)
// and expected start; each partition's nodes; and host lists expanded to
// node names. It only reads: nothing is ever changed in Slurm.
//
// scontrol runs as a child process with a deadline (kCommandTimeout), so a
// controller that does not answer costs a round, never a stuck thread; its
// configuration comes from granaryd's environment (SLURM_CONF), as for any
// Slurm client on the host.
//
// Thread-safety: all methods may be called concurrently.
#ifndef GRANARY_CACHE_SERVER_STAGING_SLURM_QUEUE_H_
#define GRANARY_CACHE_SERVER_STAGING_SLURM_QUEUE_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/base/mutex.h"

namespace granary {

struct SlurmJob {
  enum class Phase { kPending, kRunning, kEnded };
  std::string id;
  std::string state;  // As scontrol shows it: PENDING, RUNNING, COMPLETED...
  Phase phase = Phase::kPending;
  std::string partition;     // One, or several joined by ','.
  std::string planned;       // SchedNodeList: a host list, "" when none.
  std::string allocated;     // NodeList: a host list, "" when none.
  int64_t start_unix_s = 0;  // Expected (pending) or actual start; 0: unknown.
};

// The jobs in `scontrol show job -o` output (Slurm 22.05's keys, in its
// order), by id. A line that does not open with a numeric JobId, or shows
// no JobState, is skipped, and so is a second line of one job. Values may
// hold spaces and '=' (a job's name, comment or paths): a "Key=" inside one
// counts only where Slurm prints that key, so it does not shift the fields
// read.
absl::flat_hash_map<std::string, SlurmJob> ParseSlurmJobs(std::string_view text);

// Partition name -> its Nodes host list, from `scontrol show partition -o`.
absl::flat_hash_map<std::string, std::string> ParseSlurmPartitions(std::string_view text);

// The output of `argv` (standard output and error), run with no shell and
// killed at `timeout`. UNAVAILABLE naming the command when it cannot be run,
// exits non-zero (with its output) or is killed.
absl::StatusOr<std::string> RunCommand(const std::vector<std::string>& argv,
                                       std::chrono::milliseconds timeout);

class SlurmQueue {
 public:
  static constexpr std::chrono::seconds kCommandTimeout{10};
  static constexpr size_t kMaxRememberedHostLists = 1024;

  explicit SlurmQueue(std::string scontrol);

  // Every job the controller knows, by id.
  absl::StatusOr<absl::flat_hash_map<std::string, SlurmJob>> Jobs() const;
  // Every partition's host list, by name.
  absl::StatusOr<absl::flat_hash_map<std::string, std::string>> Partitions() const;
  // The node names of `host_list` ("gpu[01-03],cpu7"); remembered.
  absl::StatusOr<std::vector<std::string>> Expand(const std::string& host_list);

 private:
  const std::string scontrol_;
  Mutex mu_;
  absl::flat_hash_map<std::string, std::vector<std::string>> expanded_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_STAGING_SLURM_QUEUE_H_
