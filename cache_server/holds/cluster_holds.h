// ClusterHolds places, releases and lists holds (HoldTable) across the
// cluster: a job's datasets are held on every live member of the cache
// groups it targets, each member in its own table (this node's directly,
// the others' with Staging.PlaceHold over their channels).
//
// A refusal by one member (its hold share is full) refuses the whole hold:
// what the other members placed for the holder is released, so a job is
// held everywhere it targets or nowhere. A member that cannot be reached, or
// does not know a dataset yet, is logged and passed over; the others hold.
//
// Thread-safety: all methods may be called concurrently.
#ifndef GRANARY_CACHE_SERVER_HOLDS_CLUSTER_HOLDS_H_
#define GRANARY_CACHE_SERVER_HOLDS_CLUSTER_HOLDS_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cache_server/cluster/cluster_view.h"
#include "cache_server/holds/hold_table.h"
#include "proto/staging.pb.h"

namespace granary {

class ClusterHolds {
 public:
  static constexpr std::chrono::seconds kCallTimeout{5};

  // The parts must outlive the object.
  ClusterHolds(HoldTable* local, ClusterView* cluster);

  // Holds `datasets` for `holder` on every live member of `groups` for
  // `lease`; the first refusal (RESOURCE_EXHAUSTED, naming the node and the
  // holds that fill its share) otherwise.
  absl::Status Place(const std::string& holder, const std::vector<std::string>& datasets,
                     const std::vector<std::string>& groups, std::chrono::milliseconds lease);
  // Releases `holder` on every live member.
  void Release(const std::string& holder);
  // Releases `holder` on every live member of `groups` (those a job no
  // longer targets).
  void ReleaseIn(const std::string& holder, const std::vector<std::string>& groups);
  // Every live member's holds; a member that could not be asked has its error.
  v1::ListHoldsResponse List();

 private:
  // Places on `member`; OK for one that could not be asked (logged).
  absl::Status PlaceOn(const Member& member, const v1::PlaceHoldRequest& request);
  v1::NodeHolds ListOn(const Member& member);
  void ReleaseOn(const Member& member, const std::string& holder);
  bool IsSelf(const Member& member) const { return member.id == cluster_->self().id; }

  HoldTable* const local_;
  ClusterView* const cluster_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_HOLDS_CLUSTER_HOLDS_H_
