#include "common/cluster/placement_ring.h"

#include <algorithm>
#include <bit>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/dataset/hash.h"

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
                                                   uint32_t points_per_member) {
  if (nodes.empty()) return absl::InvalidArgumentError("placement ring needs at least one node");
  if (nodes.size() > kMaxNodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "placement ring has ", nodes.size(), " nodes; a cache group holds at most ", kMaxNodes));
  }
  if (points_per_member == 0) {
    return absl::InvalidArgumentError("placement ring needs at least one point per member");
  }
  absl::flat_hash_set<std::string> seen;
  uint32_t heaviest = 0;
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
    heaviest = std::max(heaviest, node.weight);
  }
  // A member of the top weight class (the heaviest weight rounded up to a
  // power of two) gets top_points points, fewer in groups so large that
  // kMaxPoints would not hold were every member in that class; the others
  // get their weight's share of it. Both are powers of two, so a point count
  // is a shift of the weight.
  const int top_class = std::countr_zero(std::bit_ceil(heaviest));
  uint64_t top_points = std::bit_ceil(uint64_t{points_per_member});
  while (top_points > 1 && nodes.size() * top_points > kMaxPoints) top_points /= 2;
  const int scale = std::countr_zero(top_points) - top_class;
  auto points_of = [scale](uint64_t weight) {
    return std::max<uint64_t>(1, scale >= 0 ? weight << scale : weight >> -scale);
  };
  uint64_t total_points = 0;
  for (const PlacementNode& node : nodes) total_points += points_of(node.weight);
  std::vector<std::pair<uint64_t, uint32_t>> points;
  points.reserve(total_points);
  for (uint32_t n = 0; n < nodes.size(); ++n) {
    uint64_t count = points_of(nodes[n].weight);
    for (uint32_t p = 0; p < count; ++p) points.emplace_back(PointHash(nodes[n].id, p), n);
  }
  // Ties between equal hashes are broken by node id so every builder agrees.
  std::sort(points.begin(), points.end(), [&nodes](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    return nodes[a.second].id < nodes[b.second].id;
  });

  PlacementRing ring;
  // About 5-10 points a line: few lines spill past kInlinePoints, and the
  // lines stay small enough for the TLB.
  size_t lines = std::max<size_t>(2, std::bit_ceil((points.size() + 9) / 10));
  ring.line_bits_ = std::countr_zero(lines);
  ring.points_.resize(points.size());
  ring.lines_.resize(lines + 1);
  size_t next = 0;
  for (size_t l = 0; l < lines; ++l) {
    Line& line = ring.lines_[l];
    line.first_point = static_cast<uint32_t>(next);
    size_t count = 0;
    for (; next < points.size() && ring.LineOf(points[next].first) == l; ++next, ++count) {
      uint32_t position = ring.PositionInLine(points[next].first);
      ring.points_[next] = Point{position, points[next].second};
      if (count < kInlinePoints) {
        line.offsets[count] = static_cast<uint16_t>(position >> 16);
        line.owners[count] = static_cast<uint16_t>(points[next].second);
      }
    }
    line.inline_points = static_cast<uint8_t>(std::min<size_t>(count, kInlinePoints));
    std::fill(line.offsets + line.inline_points, line.offsets + kInlinePoints, 0xffff);
    std::fill(line.owners + line.inline_points, line.owners + kInlinePoints, 0);
    line.spills = count > kInlinePoints;
    // Keys past the line's last point belong to the next point, wrapping.
    line.owner_after = static_cast<uint16_t>(points[next == points.size() ? 0 : next].second);
  }
  ring.lines_[lines] = Line{};
  ring.lines_[lines].first_point = static_cast<uint32_t>(points.size());
  ring.nodes_ = std::move(nodes);
  return ring;
}

size_t PlacementRing::FirstPointAtOrAfter(uint64_t key_hash) const {
  size_t line = LineOf(key_hash);
  uint32_t position = PositionInLine(key_hash);
  size_t point = lines_[line].first_point;
  size_t end = lines_[line + 1].first_point;
  while (point < end && points_[point].position < position) ++point;
  return point == points_.size() ? 0 : point;
}

uint32_t PlacementRing::Owner(uint64_t key_hash) const {
  const Line& line = lines_[LineOf(key_hash)];
  uint16_t offset = static_cast<uint16_t>(PositionInLine(key_hash) >> 16);
  // Offsets are sorted, so the points before the key's are those below it;
  // branch-free so the compiler vectorizes it.
  int before = 0;
  for (int i = 0; i < kInlinePoints; ++i) before += line.offsets[i] < offset;
  if (before < line.inline_points) {
    // An equal offset needs the full positions to tell which comes first.
    if (line.offsets[before] != offset) return line.owners[before];
  } else if (!line.spills) {
    return line.owner_after;
  }
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

std::vector<PlacementRing::Arc> PlacementRing::Arcs() const {
  std::vector<Arc> arcs;
  arcs.reserve(points_.size());
  for (size_t l = 0; l + 1 < lines_.size(); ++l) {
    for (size_t p = lines_[l].first_point; p < lines_[l + 1].first_point; ++p) {
      uint64_t end =
          (uint64_t{l} << (64 - line_bits_)) | (uint64_t{points_[p].position} << (32 - line_bits_));
      arcs.push_back({end, points_[p].node});
    }
  }
  return arcs;
}

uint64_t PlacementHash(const ChunkKey& key) {
  char encoded[ChunkKey::kEncodedSize];
  key.EncodeTo(encoded);
  return Xxh3(encoded, sizeof(encoded));
}

}  // namespace granary
