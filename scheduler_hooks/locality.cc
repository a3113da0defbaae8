#include "scheduler_hooks/locality.h"

#include <algorithm>
#include <cmath>

#include "common/absl_compat.h"
#include "common/locality_share.h"

namespace granary::hooks {

void LocalityIndex::Add(const v1::LocateResponse& locate) {
  const uint64_t total = locate.total_bytes();
  if (total == 0) return;
  total_bytes_ += total;
  const double weight = static_cast<double>(total);
  nodes_.reserve(nodes_.size() + locate.nodes_size());
  for (const v1::NodeLocality& node : locate.nodes()) {
    NodeBytes& held = nodes_[node.node_id()];
    held.group = node.group();
    held.weighted_share += weight * LocalityShare(node.cached_bytes(), total, 1);
  }
  for (const v1::GroupLocality& group : locate.groups()) {
    groups_[group.group()] +=
        weight * LocalityShare(group.cached_bytes(), total, locate.replicas());
  }
}

NodeLocality LocalityIndex::Of(std::string_view node_id) const {
  NodeLocality locality;
  if (neutral()) return locality;
  auto node = nodes_.find(AsAbsl(node_id));
  if (node == nodes_.end()) return locality;
  locality.group = node->second.group;
  const double total = static_cast<double>(total_bytes_);
  locality.node_share = std::min(1.0, node->second.weighted_share / total);
  if (auto group = groups_.find(node->second.group); group != groups_.end()) {
    locality.group_share = std::min(1.0, group->second / total);
  }
  locality.score = ScoreOf(kGroupWeight * locality.group_share + kNodeWeight * locality.node_share);
  return locality;
}

int ScoreOf(double locality) {
  // The epsilon keeps 0.8 * 1 + 0.2 * 1 (0.99999...) from flooring to 9.
  int score = static_cast<int>(std::floor(locality * kMaxScore + 1e-9));
  return std::clamp(score, 0, kMaxScore);
}

}  // namespace granary::hooks
