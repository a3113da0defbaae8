#include "scheduler_hooks/locality.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"
#include "common/base/logging.h"
#include "common/base/printable.h"
#include "common/scheduling/locality_share.h"

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
  locality.node_share = ShareOf(node->second.weighted_share);
  if (auto group = groups_.find(node->second.group); group != groups_.end()) {
    locality.group_share = ShareOf(group->second);
  }
  locality.score = ScoreOf(kGroupWeight * locality.group_share + kNodeWeight * locality.node_share);
  return locality;
}

double LocalityIndex::ShareOf(double weighted_share) const {
  return std::min(1.0, weighted_share / static_cast<double>(total_bytes_));
}

namespace {

void SortLargestFirst(std::vector<LocalityIndex::Share>& shares) {
  std::sort(shares.begin(), shares.end(), [](const auto& a, const auto& b) {
    return a.share != b.share ? a.share > b.share : a.name < b.name;
  });
}

}  // namespace

std::vector<LocalityIndex::Share> LocalityIndex::GroupShares() const {
  std::vector<Share> shares;
  if (neutral()) return shares;
  for (const auto& [group, weighted] : groups_) {
    if (weighted > 0) shares.push_back({group, ShareOf(weighted)});
  }
  SortLargestFirst(shares);
  return shares;
}

std::vector<LocalityIndex::Share> LocalityIndex::NodeShares() const {
  std::vector<Share> shares;
  if (neutral()) return shares;
  for (const auto& [node, held] : nodes_) {
    if (held.weighted_share > 0) shares.push_back({node, ShareOf(held.weighted_share)});
  }
  SortLargestFirst(shares);
  return shares;
}

absl::StatusOr<LocalityIndex> LocateDatasets(const Locator& locator,
                                             const std::vector<std::string>& datasets) {
  LocalityIndex index;
  for (const std::string& dataset : datasets) {
    absl::StatusOr<v1::LocateResponse> locate = locator(dataset);
    if (locate.ok()) {
      index.Add(*locate);
    } else if (absl::IsNotFound(locate.status())) {
      GRANARY_LOG(INFO) << "dataset '" << Printable(dataset)
                        << "' is unknown to the cluster; ignored";
    } else {
      return absl::Status(locate.status().code(),
                          absl::StrCat("cannot locate dataset '", Printable(dataset),
                                       "': ", locate.status().message()));
    }
  }
  return index;
}

int ScoreOf(double locality) {
  // The epsilon keeps 0.8 * 1 + 0.2 * 1 (0.99999...) from flooring to 9.
  int score = static_cast<int>(std::floor(locality * kMaxScore + 1e-9));
  return std::clamp(score, 0, kMaxScore);
}

}  // namespace granary::hooks
