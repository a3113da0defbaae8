#include "cache_server/staging/stage_ins.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <set>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cache_server/prewarm/group_prewarm.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/base/wall_clock.h"

namespace granary {
namespace {

constexpr std::string_view kForecast = "forecast";
constexpr std::string_view kPlanned = "planned";
constexpr std::string_view kRunning = "running";
constexpr std::string_view kEnded = "ended";

bool Pending(const v1::StageIn& info) {
  return info.state() == kForecast || info.state() == kPlanned;
}

absl::Status CheckJobId(const std::string& job_id) {
  if (job_id.empty() || job_id.size() > StageIns::kMaxJobIdLength ||
      !std::all_of(job_id.begin(), job_id.end(), absl::ascii_isdigit)) {
    return absl::InvalidArgumentError(absl::StrCat("job id '", job_id.substr(0, 64),
                                                   "' is not a Slurm job id (1 to ",
                                                   StageIns::kMaxJobIdLength, " digits)"));
  }
  return absl::OkStatus();
}

}  // namespace

StageIns::StageIns(SlurmQueue* queue, ClusterView* cluster, DatasetRegistry* registry,
                   ClusterHolds* holds, StageInJournal* journal, Options options)
    : queue_(queue),
      cluster_(cluster),
      registry_(registry),
      holds_(holds),
      journal_(journal),
      options_(options) {
  {
    MutexLock lock(&mu_);
    RestoreLocked();
  }
  follower_ = std::thread([this] { FollowLoop(); });
  warmer_ = std::thread([this] { WarmLoop(); });
}

std::chrono::milliseconds StageIns::HoldLease() const {
  return std::max<std::chrono::milliseconds>(options_.poll_period * 10, std::chrono::minutes(1));
}

StageIns::~StageIns() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  poll_.SignalAll();
  work_.SignalAll();
  follower_.join();
  warmer_.join();
}

absl::StatusOr<v1::StageIn> StageIns::Start(const v1::StartStageInRequest& request) {
  GRANARY_RETURN_IF_ERROR(CheckJobId(request.job_id()));
  MutexLock lock(&mu_);
  auto it = entries_.find(request.job_id());
  if (it != entries_.end() && it->second.info.state() != kEnded) {
    Entry& entry = it->second;
    GRANARY_RETURN_IF_ERROR(SetDatasetsLocked(&entry, request.datasets()));
    JournalLocked(entry);
    const std::string state = entry.info.state();
    PlaceLocked(&entry, state, {entry.info.nodes().begin(), entry.info.nodes().end()});
    work_.SignalAll();
    return entry.info;
  }
  if (it != entries_.end()) entries_.erase(it);  // A job run again (requeued).
  GRANARY_ASSIGN_OR_RETURN(Entry * entry, CreateLocked(request.job_id(), request.datasets()));
  GRANARY_LOG(INFO) << "stage-in: following job " << request.job_id() << " for "
                    << absl::StrJoin(entry->info.datasets(), ",");
  poll_requested_ = true;
  poll_.SignalAll();
  return entry->info;
}

absl::StatusOr<v1::StageIn> StageIns::TopUp(const v1::TopUpStageInRequest& request,
                                            const std::function<bool()>& cancelled) {
  GRANARY_RETURN_IF_ERROR(CheckJobId(request.job_id()));
  if (request.nodes().empty() || static_cast<size_t>(request.nodes_size()) > kMaxNodes) {
    return absl::InvalidArgumentError(absl::StrCat("a top-up of job ", request.job_id(), " names ",
                                                   request.nodes_size(), " nodes: 1 to ", kMaxNodes,
                                                   " expected"));
  }
  if (request.max_wait_ms() == 0 || request.max_wait_ms() > kMaxTopUpWaitMs) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_wait_ms ", request.max_wait_ms(), " is not in 1 - ", kMaxTopUpWaitMs));
  }
  if (!(request.enough_share() >= 0 && request.enough_share() <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("enough_share ", request.enough_share(), " is not in 0 - 1"));
  }
  const double enough = request.enough_share() == 0 ? 1.0 : request.enough_share();
  const Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(request.max_wait_ms());
  std::vector<Target> targets;
  {
    MutexLock lock(&mu_);
    auto it = entries_.find(request.job_id());
    Entry* entry = nullptr;
    if (it != entries_.end()) {
      entry = &it->second;
    } else {
      if (request.datasets().empty()) {
        return absl::InvalidArgumentError(absl::StrCat("this granaryd does not follow job ",
                                                       request.job_id(),
                                                       " and the top-up names no datasets"));
      }
      GRANARY_ASSIGN_OR_RETURN(entry, CreateLocked(request.job_id(), request.datasets()));
    }
    PlaceLocked(entry, std::string(kRunning), {request.nodes().begin(), request.nodes().end()});
    for (const std::string& dataset : entry->info.datasets()) {
      for (const std::string& group : entry->info.groups()) {
        v1::StageInTarget* target = FindTarget(&entry->info, dataset, group);
        if (target == nullptr) continue;  // Not in the catalog.
        target->set_state("warming");
        target->clear_error();
        targets.push_back({request.job_id(), dataset, group});
      }
    }
    GRANARY_LOG(INFO) << "stage-in: job " << request.job_id() << " runs on "
                      << absl::StrJoin(request.nodes(), ",") << "; topping up " << targets.size()
                      << " (dataset, group) within " << request.max_wait_ms() << " ms";
  }
  work_.SignalAll();
  for (const Target& target : targets) {
    std::string stopped_why;
    Outcome outcome;
    if (Clock::now() >= deadline) {
      stopped_why = absl::StrCat("not topped up: the policy holds a job at most ",
                                 request.max_wait_ms(), " ms");
      outcome.status = absl::DeadlineExceededError(stopped_why);
    } else {
      outcome = Prewarm(
          target.dataset, target.group,
          [&](const v1::PrewarmProgress& progress) {
            if (enough < 1 && progress.bytes_total() > 0 &&
                static_cast<double>(progress.bytes_done()) >=
                    enough * static_cast<double>(progress.bytes_total())) {
              stopped_why = absl::StrCat("topped up to the policy's enough share, ", enough);
              return false;
            }
            return true;
          },
          [&] {
            if (cancelled()) {
              stopped_why = "the top-up's caller went away";
              return true;
            }
            if (Clock::now() >= deadline) {
              stopped_why = absl::StrCat("the policy holds a job at most ", request.max_wait_ms(),
                                         " ms; the job reads the rest through the cache");
              return true;
            }
            return false;
          });
    }
    MutexLock lock(&mu_);
    RecordLocked(target, outcome, stopped_why);
  }
  MutexLock lock(&mu_);
  auto it = entries_.find(request.job_id());
  if (it == entries_.end()) return absl::NotFoundError("the stage-in ended meanwhile");
  return it->second.info;
}

absl::StatusOr<v1::StageIn> StageIns::End(const std::string& job_id) {
  GRANARY_RETURN_IF_ERROR(CheckJobId(job_id));
  MutexLock lock(&mu_);
  auto it = entries_.find(job_id);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("no stage-in of job ", job_id));
  }
  if (it->second.info.state() != kEnded) EndLocked(&it->second, "the job was torn down");
  work_.SignalAll();
  poll_requested_ = true;
  poll_.SignalAll();
  return it->second.info;
}

std::vector<v1::StageIn> StageIns::List() const {
  MutexLock lock(&mu_);
  std::vector<const Entry*> sorted;
  for (const auto& [id, entry] : entries_) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) {
    return std::make_tuple(a->info.state() == kEnded, a->order) <
           std::make_tuple(b->info.state() == kEnded, b->order);
  });
  std::vector<v1::StageIn> list;
  list.reserve(sorted.size());
  for (const Entry* entry : sorted) list.push_back(entry->info);
  return list;
}

void StageIns::FollowLoop() {
  while (true) {
    {
      MutexLock lock(&mu_);
      poll_.WaitFor(&mu_, options_.poll_period, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || poll_requested_;
      });
      if (stopping_) return;
      poll_requested_ = false;
    }
    Poll();
  }
}

void StageIns::Poll() {
  std::vector<std::string> live;
  {
    MutexLock lock(&mu_);
    const Clock::time_point now = Clock::now();
    absl::erase_if(entries_, [now](const auto& item) {
      return item.second.info.state() == kEnded && now - item.second.ended > kEndedKept;
    });
    for (const auto& [id, entry] : entries_) {
      if (entry.info.state() != kEnded) live.push_back(id);
    }
  }
  if (!live.empty()) Follow(live);
  RenewHolds();
}

void StageIns::Follow(const std::vector<std::string>& live) {
  absl::StatusOr<absl::flat_hash_map<std::string, SlurmJob>> jobs = queue_->Jobs();
  if (!jobs.ok()) {
    if (jobs.status().ToString() != last_queue_error_) {
      GRANARY_LOG(WARNING) << "stage-in: cannot read the Slurm queue; forecasts kept: "
                           << jobs.status();
      last_queue_error_ = jobs.status().ToString();
    }
    return;
  }
  last_queue_error_.clear();
  std::optional<absl::flat_hash_map<std::string, std::string>> partitions;
  struct Update {
    std::string job_id;
    std::string state;
    std::vector<std::string> nodes;
    const SlurmJob* job = nullptr;
    std::string end_why;  // Set: the stage-in ends.
  };
  std::vector<Update> updates;
  for (const std::string& id : live) {
    Update update;
    update.job_id = id;
    auto found = jobs->find(id);
    if (found == jobs->end()) {
      update.end_why = "the scheduler no longer knows the job";
      updates.push_back(std::move(update));
      continue;
    }
    const SlurmJob& job = found->second;
    update.job = &job;
    if (job.phase == SlurmJob::Phase::kEnded) {
      update.end_why = absl::StrCat("the job ended (", job.state, ")");
      updates.push_back(std::move(update));
      continue;
    }
    std::vector<std::string> host_lists;
    if (job.phase == SlurmJob::Phase::kRunning) {
      update.state = kRunning;
      host_lists.push_back(job.allocated);
    } else if (!job.planned.empty()) {
      update.state = kPlanned;
      host_lists.push_back(job.planned);
    } else {
      update.state = kForecast;
      if (!partitions.has_value()) {
        absl::StatusOr<absl::flat_hash_map<std::string, std::string>> listed = queue_->Partitions();
        if (!listed.ok()) {
          GRANARY_LOG(WARNING) << "stage-in: cannot read Slurm's partitions: " << listed.status();
          continue;
        }
        partitions = *std::move(listed);
      }
      for (absl::string_view name : absl::StrSplit(job.partition, ',', absl::SkipEmpty())) {
        if (auto it = partitions->find(std::string(name)); it != partitions->end()) {
          host_lists.push_back(it->second);
        }
      }
    }
    bool expanded = true;
    for (const std::string& list : host_lists) {
      absl::StatusOr<std::vector<std::string>> nodes = queue_->Expand(list);
      if (!nodes.ok()) {
        GRANARY_LOG(WARNING) << "stage-in: job " << id << ": " << nodes.status();
        expanded = false;
        break;
      }
      update.nodes.insert(update.nodes.end(), nodes->begin(), nodes->end());
    }
    if (expanded) updates.push_back(std::move(update));
  }
  MutexLock lock(&mu_);
  for (const Update& update : updates) {
    auto it = entries_.find(update.job_id);
    if (it == entries_.end() || it->second.info.state() == kEnded) continue;
    Entry& entry = it->second;
    if (!update.end_why.empty()) {
      EndLocked(&entry, update.end_why);
      continue;
    }
    // A top-up moved it to its nodes already; a listing read before the job
    // started does not move it back.
    if (entry.info.state() == kRunning) continue;
    entry.info.set_partition(update.job->partition);
    entry.info.set_start_unix_s(update.job->start_unix_s);
    const std::vector<std::string> old_groups(entry.info.groups().begin(),
                                              entry.info.groups().end());
    PlaceLocked(&entry, update.state, update.nodes);
    if (!std::equal(old_groups.begin(), old_groups.end(), entry.info.groups().begin(),
                    entry.info.groups().end())) {
      GRANARY_LOG(INFO) << "stage-in: job " << update.job_id << " (" << update.state << ", start "
                        << update.job->start_unix_s << ") now targets groups "
                        << absl::StrJoin(entry.info.groups(), ",");
    }
  }
  work_.SignalAll();
}

void StageIns::RenewHolds() {
  const Clock::time_point now = Clock::now();
  std::vector<Holding> due;
  std::vector<std::string> released;
  {
    MutexLock lock(&mu_);
    released.swap(to_release_);
    for (auto& [id, entry] : entries_) {
      const v1::StageIn& info = entry.info;
      if (info.state() == kEnded || info.groups().empty()) continue;
      Holding holding;
      holding.job_id = id;
      holding.groups.assign(info.groups().begin(), info.groups().end());
      for (const std::string& dataset : info.datasets()) {
        if (FindTarget(&entry.info, dataset, "") == nullptr) holding.datasets.push_back(dataset);
      }
      if (holding.datasets.empty() ||
          (holding.groups == entry.held_groups && now - entry.held_at < HoldLease() / 3)) {
        continue;
      }
      std::set_difference(entry.held_groups.begin(), entry.held_groups.end(),
                          holding.groups.begin(), holding.groups.end(),
                          std::back_inserter(holding.left));
      due.push_back(std::move(holding));
    }
  }
  for (const std::string& job_id : released) holds_->Release("slurm:" + job_id);
  for (const Holding& holding : due) {
    const std::string holder = "slurm:" + holding.job_id;
    absl::Status placed = holds_->Place(holder, holding.datasets, holding.groups, HoldLease());
    if (placed.ok()) holds_->ReleaseIn(holder, holding.left);
    MutexLock lock(&mu_);
    auto it = entries_.find(holding.job_id);
    if (it == entries_.end() || it->second.info.state() == kEnded) {
      to_release_.push_back(holding.job_id);  // It ended meanwhile.
      continue;
    }
    Entry& entry = it->second;
    const std::string hold = placed.ok() ? "held" : absl::StrCat("refused: ", placed.message());
    if (hold != entry.info.hold() && placed.ok()) {
      GRANARY_LOG(INFO) << "stage-in: job " << holding.job_id << " held in "
                        << absl::StrJoin(holding.groups, ",");
    } else if (hold != entry.info.hold()) {
      GRANARY_LOG(WARNING) << "stage-in: job " << holding.job_id << " reads through: " << hold;
    }
    entry.info.set_hold(hold);
    entry.held_groups = holding.groups;
    entry.held_at = now;
  }
}

void StageIns::WarmLoop() {
  while (true) {
    std::optional<Target> target;
    {
      MutexLock lock(&mu_);
      while (!stopping_ && !(target = NextTargetLocked()).has_value()) work_.Wait(&mu_);
      if (stopping_) return;
    }
    Outcome outcome = Prewarm(
        target->dataset, target->group,
        [this, &target](const v1::PrewarmProgress& progress) {
          MutexLock lock(&mu_);
          auto it = entries_.find(target->job_id);
          if (it == entries_.end()) return false;
          v1::StageInTarget* warming = FindTarget(&it->second.info, target->dataset, target->group);
          if (warming == nullptr) return false;
          warming->set_bytes_cached(progress.bytes_done());
          warming->set_bytes_total(progress.bytes_total());
          return true;
        },
        [this, &target] {
          MutexLock lock(&mu_);
          return !WantedLocked(*target);
        });
    MutexLock lock(&mu_);
    if (WantedLocked(*target)) {
      RecordLocked(*target, outcome, "");
      continue;
    }
    // Stopped for its forecast's sake: warmed again if the forecast returns.
    auto it = entries_.find(target->job_id);
    if (it == entries_.end() || !Pending(it->second.info)) continue;
    if (v1::StageInTarget* stopped = FindTarget(&it->second.info, target->dataset, target->group);
        stopped != nullptr) {
      stopped->set_state("waiting");
    }
  }
}

std::optional<StageIns::Target> StageIns::NextTargetLocked() {
  std::vector<Entry*> pending;
  for (auto& [id, entry] : entries_) {
    if (Pending(entry.info)) pending.push_back(&entry);
  }
  auto start = [](const Entry* entry) {
    return entry->info.start_unix_s() > 0 ? entry->info.start_unix_s()
                                          : std::numeric_limits<int64_t>::max();
  };
  std::sort(pending.begin(), pending.end(), [&start](const Entry* a, const Entry* b) {
    return std::make_tuple(start(a), a->order) < std::make_tuple(start(b), b->order);
  });
  for (Entry* entry : pending) {
    const auto& groups = entry->info.groups();
    for (v1::StageInTarget& target : *entry->info.mutable_targets()) {
      if (target.state() != "waiting" ||
          std::find(groups.begin(), groups.end(), target.group()) == groups.end()) {
        continue;
      }
      target.set_state("warming");
      GRANARY_LOG(INFO) << "stage-in: job " << entry->info.job_id() << " (start "
                        << entry->info.start_unix_s() << "): warming '" << target.dataset()
                        << "' in group " << target.group();
      return Target{entry->info.job_id(), target.dataset(), target.group()};
    }
  }
  return std::nullopt;
}

bool StageIns::WantedLocked(const Target& target) const {
  if (stopping_) return false;
  auto it = entries_.find(target.job_id);
  if (it == entries_.end() || !Pending(it->second.info)) return false;
  const auto& groups = it->second.info.groups();
  return std::find(groups.begin(), groups.end(), target.group) != groups.end();
}

StageIns::Outcome StageIns::Prewarm(const std::string& dataset, const std::string& group,
                                    const std::function<bool(const v1::PrewarmProgress&)>& report,
                                    const std::function<bool()>& cancelled) {
  v1::PrewarmRequest request;
  request.set_name(dataset);
  request.set_group(group);
  GroupPrewarm prewarm(cluster_, std::move(request), kProgressInterval);
  Outcome outcome;
  outcome.status = prewarm.Run(
      [&outcome, &report](const v1::PrewarmProgress& progress) {
        outcome.progress = progress;
        return report(progress);
      },
      cancelled);
  return outcome;
}

void StageIns::RecordLocked(const Target& target, const Outcome& outcome,
                            const std::string& stopped_why) {
  auto it = entries_.find(target.job_id);
  if (it == entries_.end()) return;
  v1::StageInTarget* recorded = FindTarget(&it->second.info, target.dataset, target.group);
  if (recorded == nullptr) return;
  const v1::PrewarmProgress& progress = outcome.progress;
  recorded->set_bytes_cached(progress.bytes_done());
  recorded->set_bytes_total(progress.bytes_total());
  recorded->clear_error();
  if (!progress.failures().empty()) {
    recorded->set_state("partial");
    recorded->set_error(
        absl::StrCat(progress.failures(0).path(), ": ", progress.failures(0).error(),
                     progress.failures_size() > 1
                         ? absl::StrCat(" (and ", progress.failures_size() - 1, " more)")
                         : ""));
  } else if (!stopped_why.empty()) {
    recorded->set_state("partial");
    recorded->set_error(stopped_why);
  } else if (!outcome.status.ok()) {
    recorded->set_state("failed");
    recorded->set_error(std::string(outcome.status.message()));
  } else if (progress.finished() && progress.bytes_done() >= progress.bytes_total()) {
    recorded->set_state("cached");
  } else {
    recorded->set_state("partial");
  }
  if (recorded->state() != "cached") {
    GRANARY_LOG(WARNING) << "stage-in: job " << target.job_id << ": '" << target.dataset
                         << "' in group " << target.group << " is " << recorded->state() << " ("
                         << recorded->bytes_cached() << " of " << recorded->bytes_total()
                         << " bytes): " << recorded->error();
  }
}

absl::StatusOr<StageIns::Entry*> StageIns::CreateLocked(
    const std::string& job_id, const google::protobuf::RepeatedPtrField<std::string>& datasets) {
  if (LiveLocked() >= kMaxLive) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "granaryd follows ", kMaxLive, " stage-ins already; job ", job_id, " reads through"));
  }
  Entry entry;
  entry.order = next_order_++;
  entry.info.set_job_id(job_id);
  entry.info.set_state(std::string(kForecast));
  entry.info.set_created_unix_ms(NowUnixMs());
  GRANARY_RETURN_IF_ERROR(SetDatasetsLocked(&entry, datasets));
  JournalLocked(entry);
  auto [it, inserted] = entries_.insert_or_assign(job_id, std::move(entry));
  return &it->second;
}

void StageIns::RestoreLocked() {
  absl::StatusOr<std::vector<v1::StageIn>> recorded = journal_->Load();
  if (!recorded.ok()) {
    GRANARY_LOG(ERROR) << "stage-in: not followed again; their jobs read through: "
                       << recorded.status();
    return;
  }
  for (const v1::StageIn& record : *recorded) {
    Entry entry;
    entry.order = next_order_++;
    entry.restored = true;
    entry.info.set_job_id(record.job_id());
    entry.info.set_state(std::string(kForecast));
    entry.info.set_created_unix_ms(record.created_unix_ms());
    if (absl::Status set = SetDatasetsLocked(&entry, record.datasets()); !set.ok()) {
      GRANARY_LOG(ERROR) << "stage-in: job " << record.job_id() << " not followed again: " << set;
      continue;
    }
    GRANARY_LOG(INFO) << "stage-in: following job " << record.job_id() << " again for "
                      << absl::StrJoin(entry.info.datasets(), ",");
    entries_.insert_or_assign(record.job_id(), std::move(entry));
  }
  poll_requested_ = !entries_.empty();
}

void StageIns::JournalLocked(const Entry& entry) {
  if (absl::Status put = journal_->Put(entry.info); !put.ok()) {
    GRANARY_LOG(WARNING) << "stage-in: job " << entry.info.job_id()
                         << " is not followed again after a restart: " << put;
  }
}

absl::Status StageIns::SetDatasetsLocked(
    Entry* entry, const google::protobuf::RepeatedPtrField<std::string>& datasets) {
  if (datasets.empty() || static_cast<size_t>(datasets.size()) > kMaxDatasets) {
    return absl::InvalidArgumentError(absl::StrCat("a stage-in of job ", entry->info.job_id(),
                                                   " names ", datasets.size(), " datasets: 1 to ",
                                                   kMaxDatasets, " expected"));
  }
  std::set<std::string> names;
  entry->info.clear_datasets();
  for (const std::string& name : datasets) {
    if (!names.insert(name).second) continue;
    entry->info.add_datasets(name);
    absl::StatusOr<v1::DatasetInfo> known = registry_->Get(name);
    if (known.ok() || FindTarget(&entry->info, name, "") != nullptr) continue;
    v1::StageInTarget* failed = entry->info.add_targets();
    failed->set_dataset(name);
    failed->set_state("failed");
    failed->set_error(std::string(known.status().message()));
    GRANARY_LOG(WARNING) << "stage-in: job " << entry->info.job_id()
                         << " reads through: " << known.status();
  }
  return absl::OkStatus();
}

void StageIns::PlaceLocked(Entry* entry, const std::string& state,
                           const std::vector<std::string>& nodes) {
  v1::StageIn& info = entry->info;
  info.set_state(state);
  info.clear_nodes();
  for (const std::string& node : nodes) info.add_nodes(node);
  info.clear_groups();
  for (const std::string& group : GroupsOf(nodes)) info.add_groups(group);
  if (info.groups().empty() && !nodes.empty()) {
    info.set_note(
        "none of the job's nodes is a Granary node (node ids must equal Slurm node "
        "names); the job reads through");
  } else if (info.groups_size() > 0) {
    info.clear_note();
  }
  std::vector<std::string> datasets(info.datasets().begin(), info.datasets().end());
  for (const std::string& dataset : datasets) {
    if (FindTarget(&info, dataset, "") != nullptr) continue;  // Unknown.
    for (const std::string& group : GroupsOf(nodes)) {
      if (FindTarget(&info, dataset, group) != nullptr) continue;
      v1::StageInTarget* target = info.add_targets();
      target->set_dataset(dataset);
      target->set_group(group);
      target->set_state("waiting");
    }
  }
}

void StageIns::EndLocked(Entry* entry, const std::string& why) {
  if (!entry->held_groups.empty() || entry->restored) to_release_.push_back(entry->info.job_id());
  if (absl::Status erased = journal_->Erase(entry->info.job_id()); !erased.ok()) {
    GRANARY_LOG(WARNING) << "stage-in: job " << entry->info.job_id() << ": " << erased;
  }
  entry->held_groups.clear();
  entry->info.clear_hold();
  entry->info.set_state(std::string(kEnded));
  entry->info.set_note(why);
  entry->ended = Clock::now();
  GRANARY_LOG(INFO) << "stage-in: job " << entry->info.job_id() << " ended: " << why;
}

v1::StageInTarget* StageIns::FindTarget(v1::StageIn* info, const std::string& dataset,
                                        const std::string& group) {
  for (v1::StageInTarget& target : *info->mutable_targets()) {
    if (target.dataset() == dataset && target.group() == group) return &target;
  }
  return nullptr;
}

std::vector<std::string> StageIns::GroupsOf(const std::vector<std::string>& nodes) const {
  std::shared_ptr<const ClusterMap> map = cluster_->current();
  std::set<std::string> groups;
  for (const std::string& node : nodes) {
    if (const Member* member = map->Find(node); member != nullptr) groups.insert(member->group);
  }
  return {groups.begin(), groups.end()};
}

size_t StageIns::LiveLocked() const {
  return std::count_if(entries_.begin(), entries_.end(),
                       [](const auto& item) { return item.second.info.state() != kEnded; });
}

}  // namespace granary
