// GroupPrewarm coordinates the prewarm of one cache group from whichever node
// the client asked: every live member of the group is asked, in parallel, to
// fetch the share of the dataset it owns (PrewarmRequest.owned_share_only),
// and their progress streams are summed into one, so the client sees a single
// progress bar for the whole group.
//
// A member whose stream fails for a reason another member would not share
// (unreachable, deadline, crash) is routed around, and so is one that sends
// no progress for kMemberSilence although members report every interval (it
// is stopped, or cut off with its connection still open, and would hold up
// the whole prewarm): once the others finish, they are asked again with that
// member named unreachable, so its share moves to the next owners on the
// ring. Chunks already cached are skipped, so the second round costs only the
// moved share. Members that still fail are listed as failures in the final
// progress.
//
// Thread-safety: one Run() per object; `report` and `cancelled` are called
// from the thread that called Run().
#ifndef GRANARY_CACHE_SERVER_PREWARM_GROUP_PREWARM_H_
#define GRANARY_CACHE_SERVER_PREWARM_GROUP_PREWARM_H_

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cache_server/cluster/cluster_view.h"
#include "proto/granary.pb.h"

namespace granary {

class GroupPrewarm {
 public:
  static constexpr std::chrono::seconds kMemberSilence{10};

  // `request` names the dataset, paths, parallelism and group.
  GroupPrewarm(ClusterView* cluster, v1::PrewarmRequest request,
               std::chrono::milliseconds report_interval);

  // Runs the group prewarm. `report` receives the summed progress every
  // interval and last with finished=true; it returns false when the client
  // went away. `cancelled` is polled as often. An error only when no member
  // could be asked at all, or on cancellation.
  absl::Status Run(const std::function<bool(const v1::PrewarmProgress&)>& report,
                   const std::function<bool()>& cancelled);

 private:
  struct MemberShare {
    Member member;
    v1::PrewarmProgress progress;
    absl::Status status;
    bool done = false;
    std::chrono::steady_clock::time_point heard;  // Last progress, or the round's start.
    bool silent = false;                          // Cancelled for its silence.
  };
  // One round over `shares` with `unreachable` named; returns false when
  // cancelled or the client went away.
  bool RunRound(std::vector<MemberShare>* shares, const std::vector<std::string>& unreachable,
                const std::function<bool(const v1::PrewarmProgress&)>& report,
                const std::function<bool()>& cancelled);
  v1::PrewarmProgress Sum(const std::vector<MemberShare>& shares, bool finished) const;

  ClusterView* const cluster_;
  const v1::PrewarmRequest request_;
  const std::chrono::milliseconds report_interval_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_PREWARM_GROUP_PREWARM_H_
