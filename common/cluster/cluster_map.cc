#include "common/cluster/cluster_map.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"

namespace granary {

absl::StatusOr<std::shared_ptr<const ClusterMap>> ClusterMap::Build(std::vector<Member> members,
                                                                    std::string_view ready_group) {
  std::shared_ptr<ClusterMap> map(new ClusterMap());
  std::sort(members.begin(), members.end(),
            [](const Member& a, const Member& b) { return a.id < b.id; });
  for (uint32_t i = 0; i < members.size(); ++i) {
    const Member& member = members[i];
    if (member.id.empty()) return absl::InvalidArgumentError("cluster member has an empty id");
    if (member.address.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster member '", member.id, "' has no address"));
    }
    if (member.group.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster member '", member.id, "' has an empty group"));
    }
    if (member.weight < 1 || member.weight > 1000) {
      return absl::InvalidArgumentError(absl::StrCat("cluster member '", member.id, "' has weight ",
                                                     member.weight, "; weights are 1-1000"));
    }
    if (!map->index_by_id_.emplace(member.id, i).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster member '", member.id, "' is listed twice"));
    }
    Group& group = map->groups_[member.group];
    if (member.up) group.member_indexes.push_back(i);
  }
  for (const auto& [name, group] : map->groups_) {
    if (group.member_indexes.size() > PlacementRing::kMaxNodes) {
      return absl::InvalidArgumentError(
          absl::StrCat("cache group '", name, "' has ", group.member_indexes.size(),
                       " live members; a group holds at most ", PlacementRing::kMaxNodes));
    }
  }
  map->members_ = std::move(members);
  if (auto ready = map->groups_.find(AsAbsl(ready_group)); ready != map->groups_.end()) {
    map->RingOf(ready->second);
  }
  return std::shared_ptr<const ClusterMap>(std::move(map));
}

const PlacementRing* ClusterMap::RingOf(const Group& group) const {
  absl::call_once(group.ring_built, [&] {
    if (group.member_indexes.empty()) return;
    std::vector<PlacementNode> nodes;
    nodes.reserve(group.member_indexes.size());
    for (uint32_t index : group.member_indexes) {
      nodes.push_back({members_[index].id, members_[index].weight});
    }
    // Build() checked everything the ring checks: ids, weights, group size.
    group.ring = std::make_unique<PlacementRing>(*PlacementRing::Build(std::move(nodes)));
  });
  return group.ring.get();
}

std::vector<std::string> ClusterMap::groups() const {
  std::vector<std::string> names;
  for (const auto& [name, group] : groups_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

const Member* ClusterMap::Find(std::string_view id) const {
  auto it = index_by_id_.find(AsAbsl(id));
  return it == index_by_id_.end() ? nullptr : &members_[it->second];
}

std::vector<const Member*> ClusterMap::Owners(const ChunkKey& key, std::string_view group,
                                              size_t count) const {
  std::vector<const Member*> owners;
  auto it = groups_.find(AsAbsl(group));
  if (it == groups_.end()) return owners;
  const Group& found = it->second;
  const PlacementRing* ring = RingOf(found);
  if (ring == nullptr) return owners;
  for (uint32_t node : ring->Owners(PlacementHash(key), count)) {
    owners.push_back(&members_[found.member_indexes[node]]);
  }
  return owners;
}

}  // namespace granary
