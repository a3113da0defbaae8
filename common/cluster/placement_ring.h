// PlacementRing decides which nodes of a cache group own a chunk: a weighted
// consistent-hash ring of virtual nodes, laid out so that most lookups read
// one cache line.
//
// Why this algorithm (bench/placement measures it):
//  - Rendezvous (HRW) hashing has perfect weighting and minimal movement but
//    costs O(nodes) per lookup: microseconds at 1,000 nodes.
//  - Maglev and AnchorHash look up in O(1), but Maglev moves several times the
//    minimum on a membership change, and AnchorHash's mapping depends on the
//    order of past changes, which nodes that join late do not know.
//  - A virtual-node ring depends only on the current member set (every node
//    computes the same ring from the same members), moves exactly the keys
//    whose arc changed owner, and balances to within 10% at 1,000 nodes once
//    the average member has a few thousand points. Balancing fewer points after the fact would
//    make a node's points depend on the others' and move more than the
//    minimum.
//  - Its cost is memory: millions of points at 1,000 nodes. A lookup is a
//    DRAM miss whose cost grows with the memory it lands in (TLB reach), so
//    the layout is what decides the latency. The ring is cut into cache-line
//    "lines" of 5-10 points each, which hold the points' 16-bit offsets and
//    owners inline: a lookup reads one line, and only a line with more than
//    kInlinePoints points, or an offset equal to the key's, sends it on to the
//    full points array.
//  - Points follow relative weight, not its scale: a member of the group's
//    top weight class (its heaviest weight rounded up to a power of two) gets
//    points_per_member rounded up to a power of two, every other member its
//    weight's share of that (at least one point), and a group so large that
//    kMaxPoints would not hold were every member in the top class gets half
//    as many, or a quarter, as needed. Weights 1-4 and 250-1000 make rings of
//    the same size, and memory stays bounded with weights up to 1,000. The
//    factor depends on neither the mean weight nor, below kMaxPoints /
//    points_per_member members, the count: a factor that did would change
//    with ordinary joins and leaves under churn, and each change gives every
//    member new points and moves about half the keys (bench/cluster's
//    simulation measured it). This one changes only when the last member of
//    the top class leaves, one of a heavier class joins, or a very large
//    group's count crosses a doubling; between those, a membership change
//    moves the minimum.
//  - Members of weight far below the mean get few points, and their load
//    strays further from their share: the ring balances weights within a
//    small factor of each other.
//
// Thread-safety: immutable after Build(); safe to share across threads. A
// membership change builds a new ring and swaps the pointer.
#ifndef GRANARY_COMMON_CLUSTER_PLACEMENT_RING_H_
#define GRANARY_COMMON_CLUSTER_PLACEMENT_RING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/huge_page_allocator.h"
#include "common/dataset/chunk_key.h"

namespace granary {

struct PlacementNode {
  std::string id;
  uint32_t weight = 1;  // Relative capacity, 1-1000.
};

class PlacementRing {
 public:
  // Points of the average member; 1,024 per unit of weight at weights 1-4.
  static constexpr uint32_t kDefaultPointsPerMember = 2560;
  // Bound on the points of one ring (32 MB of points and about as much of
  // lines); every member keeps at least one point.
  static constexpr uint64_t kMaxPoints = uint64_t{1} << 22;
  // Owners are stored as 16-bit indexes in the lines.
  static constexpr size_t kMaxNodes = size_t{1} << 16;

  // Fails with INVALID_ARGUMENT for an empty member list, more than kMaxNodes
  // members, a duplicate or empty node id, or a weight outside 1-1000.
  static absl::StatusOr<PlacementRing> Build(std::vector<PlacementNode> nodes,
                                             uint32_t points_per_member = kDefaultPointsPerMember);

  // Index into nodes() of the node that owns `key_hash`.
  uint32_t Owner(uint64_t key_hash) const;

  // Up to `count` distinct owners in preference order (the first is Owner()):
  // replicas and failover targets.
  std::vector<uint32_t> Owners(uint64_t key_hash, size_t count) const;

  // The ring as arcs, sorted by end: each point owns the hashes after the
  // previous point's up to and including its own (the first point also owns
  // those past the last). For analysis of balance and movement (bench/);
  // ends keep the top 32 + log2(lines) bits of the points' hashes.
  struct Arc {
    uint64_t end;
    uint32_t node;
  };
  std::vector<Arc> Arcs() const;

  const std::vector<PlacementNode>& nodes() const { return nodes_; }
  size_t point_count() const { return points_.size(); }
  // Bytes of the lines and the points.
  size_t memory_bytes() const {
    return lines_.size() * sizeof(Line) + points_.size() * sizeof(Point);
  }

 private:
  static constexpr int kInlinePoints = 14;

  // A virtual node. Its line (the top line_bits_ bits of its hash) is implied
  // by its position in points_; `position` keeps the next 32 bits, which
  // order the points of a line.
  struct Point {
    uint32_t position;
    uint32_t node;
  };

  // One cache line covering 1/lines_.size() of the hash space: the first
  // kInlinePoints of its points as the top 16 bits of their position (unused
  // slots 0xffff, which no key offset exceeds) and their owners, then the
  // owner of the first point after the line, for keys past its last point.
  struct alignas(64) Line {
    uint16_t offsets[kInlinePoints];
    uint16_t owners[kInlinePoints];
    uint32_t first_point;  // Index in points_ of the line's first point.
    uint8_t inline_points;
    bool spills;  // More points than kInlinePoints; the rest are in points_.
    uint16_t owner_after;
  };
  static_assert(sizeof(Line) == 64);

  PlacementRing() = default;
  size_t FirstPointAtOrAfter(uint64_t key_hash) const;
  size_t LineOf(uint64_t hash) const { return hash >> (64 - line_bits_); }
  uint32_t PositionInLine(uint64_t hash) const {
    return static_cast<uint32_t>((hash << line_bits_) >> 32);
  }

  std::vector<PlacementNode> nodes_;
  // The ring, sorted by hash.
  std::vector<Point, HugePageAllocator<Point>> points_;
  // A power of two of lines, about one per 5-10 points, plus a sentinel whose
  // first_point is points_.size().
  std::vector<Line, HugePageAllocator<Line>> lines_;
  int line_bits_ = 1;
};

// The ring position of a chunk: every node and client must agree on it.
uint64_t PlacementHash(const ChunkKey& key);

}  // namespace granary

#endif  // GRANARY_COMMON_CLUSTER_PLACEMENT_RING_H_
