#include "common/jobs/job_identity.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/base/absl_compat.h"
#include "common/base/file_util.h"
#include "common/base/printable.h"

namespace granary {
namespace {

bool AllDigits(absl::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), absl::ascii_isdigit);
}

// A pod uid as Kubernetes writes it: hex digits and dashes (the systemd
// driver's underscores already turned into dashes).
bool LooksLikePodUid(absl::string_view text) {
  return text.size() >= 8 && text.size() <= 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return absl::ascii_isxdigit(c) || c == '-';
         });
}

// The job one cgroup path names, or empty.
std::string JobOfPath(absl::string_view path) {
  bool under_kubepods = false;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (absl::StartsWith(part, "job_") && AllDigits(part.substr(4))) {
      return absl::StrCat("slurm:", part.substr(4));
    }
    if (absl::StartsWith(part, "kubepods")) under_kubepods = true;
    if (!under_kubepods) continue;
    // systemd driver: kubepods-burstable-pod<uid>.slice, the uid's dashes
    // written as underscores; cgroupfs driver: pod<uid>.
    absl::string_view name = part;
    absl::ConsumeSuffix(&name, ".slice");
    const size_t pod = name.rfind("pod");
    if (pod == absl::string_view::npos || (pod != 0 && name[pod - 1] != '-')) continue;
    const std::string uid = absl::StrReplaceAll(name.substr(pod + 3), {{"_", "-"}});
    if (LooksLikePodUid(uid)) return absl::StrCat("pod:", uid);
  }
  return "";
}

}  // namespace

absl::Status ValidateJobName(std::string_view job) {
  const absl::string_view name = AsAbsl(job);
  const size_t colon = name.find(':');
  const absl::string_view kind = name.substr(0, colon);
  const absl::string_view id = colon == absl::string_view::npos ? "" : name.substr(colon + 1);
  if (((kind == "slurm" || kind == "uid") && AllDigits(id) && id.size() <= 20) ||
      (kind == "pod" && LooksLikePodUid(id))) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("job '", Printable(job),
                   "' is not a job name: give slurm:JOBID, pod:POD_UID or uid:UID, as granary "
                   "jobs lists them"));
}

std::string JobOfCgroups(std::string_view cgroups, uid_t uid) {
  for (absl::string_view line : absl::StrSplit(AsAbsl(cgroups), '\n', absl::SkipEmpty())) {
    // hierarchy-id:controllers:path; the path may itself hold colons.
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (fields.size() != 3) continue;
    std::string job = JobOfPath(fields[2]);
    if (!job.empty()) return job;
  }
  return absl::StrCat("uid:", uid);
}

std::string JobIdentifier::JobOf(pid_t pid, uid_t uid) {
  const auto now = std::chrono::steady_clock::now();
  {
    MutexLock lock(&mutex_);
    auto it = known_.find(pid);
    if (it != known_.end() && it->second.uid == uid && now - it->second.found_at < kRemembered) {
      return it->second.job;
    }
  }
  std::string job = absl::StrCat("uid:", uid);
  if (pid > 0) {
    absl::StatusOr<std::string> cgroups =
        ReadFileToString(absl::StrCat(proc_, "/", pid, "/cgroup"), "cgroup");
    if (cgroups.ok()) job = JobOfCgroups(*cgroups, uid);
  }
  MutexLock lock(&mutex_);
  if (known_.size() >= kMaxProcesses) {
    absl::erase_if(known_,
                   [&](const auto& entry) { return now - entry.second.found_at >= kRemembered; });
    if (known_.size() >= kMaxProcesses) known_.clear();
  }
  known_[pid] = Known{job, uid, now};
  return job;
}

}  // namespace granary
