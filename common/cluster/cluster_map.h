// ClusterMap is one immutable view of the cluster: its members (node id,
// address, cache group, weight, state) and, for every cache group, the
// placement ring over the group's live members. It answers the one question
// every reader asks: which nodes of my group own this chunk, in order.
//
// A membership change (members file reloaded, an etcd lease expired) builds a
// new ClusterMap and swaps a shared_ptr: readers holding the old view finish
// with it, new reads use the new one, and reads of the group named at Build()
// never wait for a rebuild. Other groups' rings are built at their first
// lookup, once: a node of a cluster of many racks holds only the rings it
// asks about, and starts without building the others.
//
// Thread-safety: immutable after Build() except for the lazily built rings,
// which are built once under absl::call_once; safe to share across threads.
#ifndef GRANARY_COMMON_CLUSTER_CLUSTER_MAP_H_
#define GRANARY_COMMON_CLUSTER_CLUSTER_MAP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/statusor.h"
#include "common/cluster/placement_ring.h"
#include "common/dataset/chunk_key.h"
#include "common/net/defaults.h"

namespace granary {

struct Member {
  std::string id;
  std::string address;  // HOST:PORT of its TCP endpoint.
  std::string group = kDefaultGroup;
  uint32_t weight = 1;
  bool up = true;  // Down members stay listed but own nothing.

  friend bool operator==(const Member&, const Member&) = default;
};

class ClusterMap {
 public:
  // Fails with INVALID_ARGUMENT naming the member for a duplicate or empty id,
  // an empty address, or a weight outside 1-1000, and naming the group for
  // one of more than PlacementRing::kMaxNodes live members. The ring of
  // `ready_group` is built before Build() returns.
  static absl::StatusOr<std::shared_ptr<const ClusterMap>> Build(std::vector<Member> members,
                                                                 std::string_view ready_group = {});

  const std::vector<Member>& members() const { return members_; }
  // Sorted group names, including groups whose members are all down.
  std::vector<std::string> groups() const;

  const Member* Find(std::string_view id) const;

  // Up to `count` distinct live members of `group` that own `key`, in
  // preference order: the owner, then its replicas and failover targets.
  // Empty if the group is unknown or has no live member.
  std::vector<const Member*> Owners(const ChunkKey& key, std::string_view group,
                                    size_t count) const;

 private:
  ClusterMap() = default;

  struct Group {
    std::vector<uint32_t> member_indexes;  // Ring node i is members_[member_indexes[i]].
    mutable absl::once_flag ring_built;
    mutable std::unique_ptr<PlacementRing> ring;  // Null when no member of the group is up.
  };

  // The group's ring, built at the first call; null when no member is up.
  const PlacementRing* RingOf(const Group& group) const;

  std::vector<Member> members_;
  absl::flat_hash_map<std::string, uint32_t> index_by_id_;
  absl::node_hash_map<std::string, Group> groups_;  // Groups never move: their once_flags.
};

}  // namespace granary

#endif  // GRANARY_COMMON_CLUSTER_CLUSTER_MAP_H_
