#include "common/placement_ring.h"

#include <algorithm>
#include <bit>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/hash.h"

namespace granary {
namespace {

uint64_t PointHash(const std::string& node_id, uint32_t point) {
  Xxh3Stream hash;
  hash.Update(node_id);
  hash.UpdateU64(point);
  return hash.Digest();
}

}  // namespace

absl::StatusOr<PlacementRing> PlacementRing::Build(std::vector<PlacementNode> nodes,
                                                   uint32_t points_per_weight) {
  if (nodes.empty()) return absl::InvalidArgumentError("placement ring needs at least one node");
  if (points_per_weight == 0) {
    return absl::InvalidArgumentError("placement ring needs at least one point per weight");
  }
  absl::flat_hash_set<std::string> seen;
  uint64_t total_points = 0;
  for (const PlacementNode& node : nodes) {
    if (node.id.empty()) return absl::InvalidArgumentError("placement node has an empty id");
    if (!seen.insert(node.id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement node '", node.id, "' is listed twice"));
    }
    if (node.weight < 1 || node.weight > 1000) {
      return absl::InvalidArgumentError(absl::StrCat("placement node '", node.id, "' has weight ",
                                                     node.weight, "; weights are 1-1000"));
    }
    total_points += uint64_t{node.weight} * points_per_weight;
  }
  if (total_points > (uint64_t{1} << 31)) {
    return absl::InvalidArgumentError("placement ring would exceed 2^31 points");
  }

  std::vector<std::pair<uint64_t, uint32_t>> points;
  points.reserve(total_points);
  for (uint32_t n = 0; n < nodes.size(); ++n) {
    uint32_t count = nodes[n].weight * points_per_weight;
    for (uint32_t p = 0; p < count; ++p) points.emplace_back(PointHash(nodes[n].id, p), n);
  }
  // Ties between equal hashes are broken by node id so every builder agrees.
  std::sort(points.begin(), points.end(), [&nodes](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    return nodes[a.second].id < nodes[b.second].id;
  });

  PlacementRing ring;
  ring.index_bits_ = std::clamp(static_cast<int>(std::bit_width(points.size())) + 1, 1, 32);
  ring.points_.resize(points.size());
  ring.index_.resize((size_t{1} << ring.index_bits_) + 1);
  size_t bucket = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    ring.points_[i] = Point{ring.PositionInBucket(points[i].first), points[i].second};
    for (size_t point_bucket = ring.BucketOf(points[i].first); bucket <= point_bucket; ++bucket) {
      ring.index_[bucket] = Bucket{static_cast<uint32_t>(i), points[i].second};
    }
  }
  // Buckets past the last point wrap around to the first.
  for (; bucket < ring.index_.size(); ++bucket) {
    ring.index_[bucket] = Bucket{static_cast<uint32_t>(points.size()), points.front().second};
  }
  ring.nodes_ = std::move(nodes);
  return ring;
}

size_t PlacementRing::FirstPointAtOrAfter(uint64_t key_hash) const {
  size_t bucket = BucketOf(key_hash);
  uint32_t position = PositionInBucket(key_hash);
  size_t point = index_[bucket].first_point;
  size_t end = index_[bucket + 1].first_point;
  while (point < end && points_[point].position < position) ++point;
  return point == points_.size() ? 0 : point;
}

uint32_t PlacementRing::Owner(uint64_t key_hash) const {
  size_t bucket = BucketOf(key_hash);
  if (index_[bucket].first_point == index_[bucket + 1].first_point) return index_[bucket].owner;
  return points_[FirstPointAtOrAfter(key_hash)].node;
}

std::vector<uint32_t> PlacementRing::Owners(uint64_t key_hash, size_t count) const {
  std::vector<uint32_t> owners;
  count = std::min(count, nodes_.size());
  size_t point = FirstPointAtOrAfter(key_hash);
  while (owners.size() < count) {
    uint32_t node = points_[point].node;
    if (std::find(owners.begin(), owners.end(), node) == owners.end()) owners.push_back(node);
    point = point + 1 == points_.size() ? 0 : point + 1;
  }
  return owners;
}

uint64_t PlacementHash(const ChunkKey& key) {
  char encoded[ChunkKey::kEncodedSize];
  key.EncodeTo(encoded);
  return Xxh3(encoded, sizeof(encoded));
}

}  // namespace granary
