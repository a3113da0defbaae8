#include "scheduler_hooks/locality.h"

#include <algorithm>
#include <cmath>

#include "common/absl_compat.h"

namespace granary::hooks {

void LocalityIndex::Add(const v1::LocateResponse& locate) {
  if (locate.total_bytes() == 0) return;
  total_bytes_ += locate.total_bytes();
  nodes_.reserve(nodes_.size() + locate.nodes_size());
  for (const v1::NodeLocality& node : locate.nodes()) {
    NodeBytes& bytes = nodes_[node.node_id()];
    bytes.group = node.group();
    bytes.cached_bytes += node.cached_bytes();
  }
  for (const v1::GroupLocality& group : locate.groups()) {
    groups_[group.group()] += group.cached_bytes();
  }
}

NodeLocality LocalityIndex::Of(std::string_view node_id) const {
  NodeLocality locality;
  if (neutral()) return locality;
  auto node = nodes_.find(AsAbsl(node_id));
  if (node == nodes_.end()) return locality;
  locality.group = node->second.group;
  const double total = static_cast<double>(total_bytes_);
  locality.node_share = std::min(1.0, static_cast<double>(node->second.cached_bytes) / total);
  if (auto group = groups_.find(node->second.group); group != groups_.end()) {
    locality.group_share = std::min(1.0, static_cast<double>(group->second) / total);
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
