#include "cache_server/staging/slurm_queue.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/base/absl_compat.h"
#include "common/base/status.h"
#include "common/base/unique_fd.h"

extern char** environ;

namespace granary {
namespace {

// Key=value fields of one line, the first occurrence of each key: for
// `scontrol show partition -o`, whose values are an administrator's and never
// hold spaces.
absl::flat_hash_map<std::string_view, std::string_view> Fields(std::string_view line) {
  absl::flat_hash_map<std::string_view, std::string_view> fields;
  for (absl::string_view piece : absl::StrSplit(AsAbsl(line), ' ', absl::SkipEmpty())) {
    const std::string_view token = AsStd(piece);
    const size_t equals = token.find('=');
    if (equals == std::string_view::npos || equals == 0) continue;
    fields.emplace(token.substr(0, equals), token.substr(equals + 1));
  }
  return fields;
}

// The keys `scontrol show job -o` prints (Slurm 22.05) up to the last one
// read here, in the order it prints them. Anchors are printed for every job;
// the others only for some (arrays, heterogeneous jobs, pending jobs with a
// plan...) or not by every release. A "Key=" inside a value passes for a
// field only if every anchor before it comes before it in the value too.
struct JobKey {
  std::string_view name;
  bool anchor;
};
constexpr JobKey kJobKeys[] = {
    {"JobId", true},
    {"ArrayJobId", false},
    {"ArrayTaskId", false},
    {"ArrayTaskThrottle", false},
    {"HetJobId", false},
    {"HetJobOffset", false},
    {"HetJobIdSet", false},
    {"JobName", true},
    {"UserId", true},
    {"GroupId", true},
    {"MCS_label", true},
    {"Priority", true},
    {"Nice", true},
    {"Account", true},
    {"QOS", true},
    {"WCKey", false},
    {"JobState", true},
    {"Reason", true},
    {"Dependency", true},
    {"Requeue", true},
    {"Restarts", true},
    {"BatchFlag", true},
    {"Reboot", true},
    {"ExitCode", true},
    {"DerivedExitCode", false},
    {"RunTime", true},
    {"TimeLimit", true},
    {"TimeMin", true},
    {"SubmitTime", true},
    {"EligibleTime", true},
    {"AccrueTime", false},
    {"ResizeTime", false},
    {"StartTime", true},
    {"EndTime", true},
    {"Deadline", true},
    {"PreemptEligibleTime", false},
    {"PreemptTime", false},
    {"SuspendTime", false},
    {"SecsPreSuspend", false},
    {"LastSchedEval", false},
    {"Scheduler", false},
    {"Partition", true},
    {"AllocNode:Sid", true},
    {"ReqNodeList", true},
    {"ExcNodeList", true},
    {"NodeList", true},
    {"SchedNodeList", false},
    {"BatchHost", false},
    {"NumNodes", true},
};
constexpr size_t kNoKey = std::size(kJobKeys);

size_t JobKeyRank(std::string_view name) {
  for (size_t rank = 0; rank < kNoKey; ++rank) {
    if (kJobKeys[rank].name == name) return rank;
  }
  return kNoKey;
}

// The fields of one job's line, by rank in kJobKeys. Values may hold spaces
// and '=' (a job's name, a path), so a "Key=" inside one could pass for a
// field: a key counts only where Slurm prints it, after the key before it
// and with no anchor passed over; whatever else follows a key, up to the
// next one that counts, is its value.
std::array<std::optional<std::string_view>, kNoKey> JobFields(std::string_view line) {
  std::array<std::optional<std::string_view>, kNoKey> fields;
  size_t current = kNoKey;  // The rank of the key whose value is being read.
  size_t value_start = 0;
  auto close = [&](size_t end) {
    if (current == kNoKey) return;
    std::string_view value = line.substr(value_start, end - value_start);
    while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
    fields[current] = value;
  };
  for (size_t start = 0; start < line.size(); ++start) {
    if (start > 0 && line[start - 1] != ' ') continue;
    const size_t equals = line.find('=', start);
    if (equals == std::string_view::npos) break;
    const size_t rank = JobKeyRank(line.substr(start, equals - start));
    if (rank == kNoKey || (current != kNoKey && rank <= current)) continue;
    const size_t first_skipped = current == kNoKey ? 0 : current + 1;
    bool skips_anchor = false;
    for (size_t skipped = first_skipped; skipped < rank; ++skipped) {
      skips_anchor = skips_anchor || kJobKeys[skipped].anchor;
    }
    if (skips_anchor) continue;
    close(start);
    current = rank;
    value_start = equals + 1;
  }
  close(line.size());
  return fields;
}

// The first word of a field read here: none of them holds a space, and a key
// of a later Slurm that is not in kJobKeys lands after it.
std::string_view FirstWord(const std::optional<std::string_view>& value) {
  if (!value.has_value()) return {};
  return value->substr(0, value->find(' '));
}

// A host list as scontrol shows it; "" for none.
std::string HostList(std::string_view value) {
  return value == "(null)" || value == "None" ? std::string() : std::string(value);
}

// scontrol's local "2026-12-07T11:05:00"; 0 for "Unknown", "None" and the like.
int64_t LocalTime(std::string_view value) {
  std::tm parts{};
  const std::string text(value);
  const char* end = ::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &parts);
  if (end == nullptr || *end != '\0') return 0;
  parts.tm_isdst = -1;
  const time_t seconds = ::mktime(&parts);
  return seconds < 0 ? 0 : static_cast<int64_t>(seconds);
}

SlurmJob::Phase PhaseOf(std::string_view state) {
  static constexpr std::string_view kEnded[] = {"BOOT_FAIL",     "CANCELLED", "COMPLETED",
                                                "DEADLINE",      "FAILED",    "NODE_FAIL",
                                                "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT"};
  if (state == "PENDING" || state == "REQUEUED" || state == "REQUEUE_HOLD" ||
      state == "REQUEUE_FED") {
    return SlurmJob::Phase::kPending;
  }
  for (std::string_view ended : kEnded) {
    if (state == ended) return SlurmJob::Phase::kEnded;
  }
  return SlurmJob::Phase::kRunning;
}

}  // namespace

absl::flat_hash_map<std::string, SlurmJob> ParseSlurmJobs(std::string_view text) {
  absl::flat_hash_map<std::string, SlurmJob> jobs;
  for (absl::string_view line : absl::StrSplit(AsAbsl(text), '\n', absl::SkipWhitespace())) {
    if (!absl::StartsWith(line, "JobId=")) continue;
    const auto fields = JobFields(AsStd(line));
    auto get = [&fields](std::string_view key) { return FirstWord(fields[JobKeyRank(key)]); };
    const std::string_view id = get("JobId");
    if (id.empty() || get("JobState").empty() ||
        !std::all_of(id.begin(), id.end(), absl::ascii_isdigit) || jobs.contains(AsAbsl(id))) {
      continue;
    }
    SlurmJob job;
    job.id = std::string(id);
    job.state = std::string(get("JobState"));
    job.phase = PhaseOf(job.state);
    job.partition = std::string(get("Partition"));
    job.planned = HostList(get("SchedNodeList"));
    job.allocated = HostList(get("NodeList"));
    job.start_unix_s = LocalTime(get("StartTime"));
    jobs[job.id] = std::move(job);
  }
  return jobs;
}

absl::flat_hash_map<std::string, std::string> ParseSlurmPartitions(std::string_view text) {
  absl::flat_hash_map<std::string, std::string> partitions;
  for (absl::string_view line : absl::StrSplit(AsAbsl(text), '\n', absl::SkipWhitespace())) {
    const auto fields = Fields(AsStd(line));
    auto name = fields.find("PartitionName");
    auto nodes = fields.find("Nodes");
    if (name == fields.end() || nodes == fields.end()) continue;
    partitions[std::string(name->second)] = HostList(nodes->second);
  }
  return partitions;
}

absl::StatusOr<std::string> RunCommand(const std::vector<std::string>& argv,
                                       std::chrono::milliseconds timeout) {
  const std::string command = absl::StrJoin(argv, " ");
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return ErrnoStatus(errno, "pipe for " + command);
  UniqueFd read_end(pipe_fds[0]);
  UniqueFd write_end(pipe_fds[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), 2);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  write_end = UniqueFd();
  if (spawned != 0)
    return absl::UnavailableError(
        absl::StrCat("cannot run ", command, ": ", std::strerror(spawned)));
  std::string output;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd polled{.fd = read_end.get(), .events = POLLIN, .revents = 0};
    const int ready = ::poll(&polled, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char buffer[16384];
    const ssize_t got = ::read(read_end.get(), buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    output.append(buffer, static_cast<size_t>(got));
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int wait_status = 0;
  while (::waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return absl::UnavailableError(
        absl::StrCat(command, " did not finish in ", timeout.count(), " ms"));
  }
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    return absl::UnavailableError(
        absl::StrCat(command, " failed: ", absl::StripAsciiWhitespace(output)));
  }
  return output;
}

SlurmQueue::SlurmQueue(std::string scontrol) : scontrol_(std::move(scontrol)) {}

absl::StatusOr<absl::flat_hash_map<std::string, SlurmJob>> SlurmQueue::Jobs() const {
  GRANARY_ASSIGN_OR_RETURN(std::string text,
                           RunCommand({scontrol_, "show", "job", "--all", "-o"}, kCommandTimeout));
  // With no jobs at all, scontrol says so in a sentence, which has no JobId.
  return ParseSlurmJobs(text);
}

absl::StatusOr<absl::flat_hash_map<std::string, std::string>> SlurmQueue::Partitions() const {
  GRANARY_ASSIGN_OR_RETURN(
      std::string text,
      RunCommand({scontrol_, "show", "partition", "--all", "-o"}, kCommandTimeout));
  return ParseSlurmPartitions(text);
}

absl::StatusOr<std::vector<std::string>> SlurmQueue::Expand(const std::string& host_list) {
  if (host_list.empty()) return std::vector<std::string>();
  {
    MutexLock lock(&mu_);
    if (auto it = expanded_.find(host_list); it != expanded_.end()) return it->second;
  }
  GRANARY_ASSIGN_OR_RETURN(
      std::string text, RunCommand({scontrol_, "show", "hostnames", host_list}, kCommandTimeout));
  std::vector<std::string> names = absl::StrSplit(text, '\n', absl::SkipWhitespace());
  for (std::string& name : names) name = std::string(absl::StripAsciiWhitespace(name));
  MutexLock lock(&mu_);
  if (expanded_.size() >= kMaxRememberedHostLists) expanded_.clear();
  expanded_[host_list] = names;
  return names;
}

}  // namespace granary
