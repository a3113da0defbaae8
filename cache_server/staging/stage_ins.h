// StageIns keeps the stage-ins of the batch jobs a scheduler hook handed to
// this granaryd (proto/staging.proto), keyed by the Slurm job id, and fills
// the cache for them while they wait in the queue.
//
// Following the forecast: a thread reads the Slurm queue every `poll_period`
// (SlurmQueue). While a job pends, its targets are the cache groups of the
// nodes the backfill scheduler plans for it (SchedNodeList), or of its
// partition's nodes until there are planned ones; a change of plan adds the
// new groups. Granary node ids must equal Slurm node names; nodes that are
// not Granary members are passed over. Once the job has its nodes, the
// forecast is no longer followed; a job the controller reports ended, or no
// longer knows, ends its stage-in.
//
// Warming: a second thread prewarms one (dataset, group) at a time with a
// GroupPrewarm (every member of the group fetches the share it owns), taking
// first the job expected to start soonest (unknown start times last, then in
// the order stage-ins began). A prewarm whose group left the forecast, or
// whose job got its nodes or ended, is stopped; chunks already cached are
// never fetched again, so a target warmed again costs only what is missing.
//
// TopUp, when the job has its nodes (Slurm's pre_run): the targets become the
// groups of those nodes, and each (dataset, group) is prewarmed in the
// caller's thread, which skips what the forecast already brought; it stops
// once the share asked for is cached or at the policy's longest wait, so the
// job is never held past it.
//
// Holds: while a stage-in has target groups, its job's datasets are held on
// every member of them (ClusterHolds, holder "slurm:JOB"), renewed every
// third of kHoldLease, released in the groups a changed forecast leaves and
// everywhere when the stage-in ends; a refusal (a
// node's hold share is full) is recorded in the stage-in and tried again at
// the next renewal.
//
// Restarts: every stage-in not ended is recorded in a StageInJournal, and a
// new StageIns follows again those its journal holds, from the first reading
// of the queue on (a job that ended meanwhile ends its stage-in, releasing
// holds its granaryd placed before).
//
// Nothing here can fail a job: errors are recorded in the stage-in (a
// target's error, the stage-in's note) and logged, and the job reads
// through the cache. Start() never waits on Slurm or on a prewarm.
//
// Thread-safety: all methods may be called concurrently; the destructor
// stops both threads (a prewarm under way is cancelled).
#ifndef GRANARY_CACHE_SERVER_STAGING_STAGE_INS_H_
#define GRANARY_CACHE_SERVER_STAGING_STAGE_INS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache_server/catalog/dataset_registry.h"
#include "cache_server/cluster/cluster_view.h"
#include "cache_server/holds/cluster_holds.h"
#include "cache_server/staging/slurm_queue.h"
#include "cache_server/staging/stage_in_journal.h"
#include "common/base/mutex.h"
#include "proto/staging.pb.h"

namespace granary {

class StageIns {
 public:
  static constexpr size_t kMaxDatasets = 64;
  static constexpr size_t kMaxJobIdLength = 20;
  static constexpr size_t kMaxNodes = 10'000;
  // Stage-ins of jobs not ended; past it, a new one is refused.
  static constexpr size_t kMaxLive = 10'000;
  // How long an ended stage-in stays listed.
  static constexpr std::chrono::minutes kEndedKept{10};
  static constexpr std::chrono::milliseconds kProgressInterval{200};
  static constexpr uint32_t kMaxTopUpWaitMs = 3'600'000;

  struct Options {
    std::chrono::milliseconds poll_period{5000};
  };
  // How long holds last unless renewed: ten polls, and at least a minute.
  std::chrono::milliseconds HoldLease() const;

  // The parts must outlive the object; the stage-ins `journal` records are
  // followed again.
  StageIns(SlurmQueue* queue, ClusterView* cluster, DatasetRegistry* registry, ClusterHolds* holds,
           StageInJournal* journal, Options options);
  ~StageIns();
  StageIns(const StageIns&) = delete;
  StageIns& operator=(const StageIns&) = delete;

  // Begins following the job, or sets the datasets of one followed already.
  // INVALID_ARGUMENT naming the fault for a job id that is not digits, no
  // datasets or too many; RESOURCE_EXHAUSTED past kMaxLive. A dataset the
  // catalog does not know becomes a failed target naming it; the others are
  // staged.
  absl::StatusOr<v1::StageIn> Start(const v1::StartStageInRequest& request);

  // Prewarms what the groups of the job's nodes lack, within the request's
  // policy, starting the stage-in if this node does not know the job.
  // INVALID_ARGUMENT for a bad job id, no nodes or a policy out of range.
  // `cancelled` (the caller went away) stops it.
  absl::StatusOr<v1::StageIn> TopUp(const v1::TopUpStageInRequest& request,
                                    const std::function<bool()>& cancelled);

  // Ends the stage-in (the job's teardown); NOT_FOUND for a job not followed.
  absl::StatusOr<v1::StageIn> End(const std::string& job_id);

  // Every stage-in, live ones first, each in the order they began.
  std::vector<v1::StageIn> List() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    v1::StageIn info;
    uint64_t order = 0;       // When it began, among the others.
    Clock::time_point ended;  // Once info.state() is "ended".
    // The groups its holds were last placed in (or refused for), and when.
    std::vector<std::string> held_groups;
    Clock::time_point held_at;
    // Taken from the journal: its holds may have been placed before the
    // restart, and are released at its end all the same.
    bool restored = false;
  };
  struct Holding {
    std::string job_id;
    std::vector<std::string> datasets;
    std::vector<std::string> groups;
    std::vector<std::string> left;  // Groups held before and no longer targeted.
  };
  struct Target {
    std::string job_id;
    std::string dataset;
    std::string group;
  };
  struct Outcome {
    v1::PrewarmProgress progress;  // The last one received.
    absl::Status status;
  };

  // One pass over the queue: forecasts, starts and ends; then the holds.
  void Poll();
  // Applies what the queue says of the live stage-ins.
  void Follow(const std::vector<std::string>& live);
  // Places and renews the holds due, and releases those of ended stage-ins.
  void RenewHolds();
  void FollowLoop();
  void WarmLoop();
  // The stage-in target to warm next, marked "warming"; none when every
  // one is warmed or no job pends.
  std::optional<Target> NextTargetLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the warmer should still warm `target`.
  bool WantedLocked(const Target& target) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Prewarms `dataset` onto `group`; `report` sees each progress and may ask
  // to stop by answering false.
  Outcome Prewarm(const std::string& dataset, const std::string& group,
                  const std::function<bool(const v1::PrewarmProgress&)>& report,
                  const std::function<bool()>& cancelled);
  // Records `outcome` of a prewarm of `target`; `stopped_why` names what
  // stopped it early ("" when nothing did).
  void RecordLocked(const Target& target, const Outcome& outcome, const std::string& stopped_why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A new stage-in for `job_id` (not followed yet) with `datasets`.
  absl::StatusOr<Entry*> CreateLocked(
      const std::string& job_id, const google::protobuf::RepeatedPtrField<std::string>& datasets)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Follows again the stage-ins the journal holds.
  void RestoreLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records `entry` in the journal (logged when it cannot be).
  void JournalLocked(const Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets the datasets of `entry`: unknown ones become failed targets.
  absl::Status SetDatasetsLocked(Entry* entry,
                                 const google::protobuf::RepeatedPtrField<std::string>& datasets)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves `entry` to `nodes` (and their groups) in `state`, adding a waiting
  // target for each new (dataset, group).
  void PlaceLocked(Entry* entry, const std::string& state, const std::vector<std::string>& nodes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends `entry`; its holds are released by the next RenewHolds().
  void EndLocked(Entry* entry, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static v1::StageInTarget* FindTarget(v1::StageIn* info, const std::string& dataset,
                                       const std::string& group);
  // The cache groups of the Granary members among `nodes`, sorted.
  std::vector<std::string> GroupsOf(const std::vector<std::string>& nodes) const;
  size_t LiveLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  SlurmQueue* const queue_;
  ClusterView* const cluster_;
  DatasetRegistry* const registry_;
  ClusterHolds* const holds_;
  StageInJournal* const journal_;
  const Options options_;

  mutable Mutex mu_;
  CondVar poll_;  // A stage-in began, or stopping.
  CondVar work_;  // A target to warm may have appeared, or stopping.
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool poll_requested_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_order_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  // Jobs whose stage-ins ended with holds placed.
  std::vector<std::string> to_release_ ABSL_GUARDED_BY(mu_);
  // The last error reading the queue, logged once; the follower's alone.
  std::string last_queue_error_;
  std::thread follower_;
  std::thread warmer_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_STAGING_STAGE_INS_H_
