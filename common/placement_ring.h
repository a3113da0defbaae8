// PlacementRing decides which nodes of a cache group own a chunk: a weighted
// consistent-hash ring of virtual nodes with a bucket index for O(1) lookups.
//
// Why this algorithm (measured in bench/placement, figures in bench/RESULTS.md):
//  - Rendezvous (HRW) hashing has perfect weighting and minimal movement but
//    costs O(nodes) per lookup: microseconds at 1,000 nodes.
//  - Maglev and AnchorHash look up in O(1), but Maglev moves several times the
//    minimum on a membership change, and AnchorHash's mapping depends on the
//    order of past changes, which nodes that join late do not know.
//  - A virtual-node ring depends only on the current member set (every node
//    computes the same ring from the same members), moves exactly the keys
//    whose arc changed owner, and balances to within a few percent once each
//    unit of weight has about a thousand points. Its only cost, a binary search
//    over millions of points, is removed by indexing the ring by the top bits of
//    the hash: most lookups touch one index bucket, the rest one or two points.
//
// Thread-safety: immutable after Build(); safe to share across threads. A
// membership change builds a new ring and swaps the pointer.
#ifndef GRANARY_COMMON_PLACEMENT_RING_H_
#define GRANARY_COMMON_PLACEMENT_RING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/chunk_key.h"
#include "common/huge_page_allocator.h"

namespace granary {

struct PlacementNode {
  std::string id;
  uint32_t weight = 1;  // Relative capacity, 1-1000.
};

class PlacementRing {
 public:
  static constexpr uint32_t kDefaultPointsPerWeight = 1024;

  // Fails with INVALID_ARGUMENT for an empty member list, a duplicate or empty
  // node id, or a weight outside 1-1000.
  static absl::StatusOr<PlacementRing> Build(std::vector<PlacementNode> nodes,
                                             uint32_t points_per_weight = kDefaultPointsPerWeight);

  // Index into nodes() of the node that owns `key_hash`.
  uint32_t Owner(uint64_t key_hash) const;

  // Up to `count` distinct owners in preference order (the first is Owner()):
  // replicas and failover targets.
  std::vector<uint32_t> Owners(uint64_t key_hash, size_t count) const;

  const std::vector<PlacementNode>& nodes() const { return nodes_; }
  size_t point_count() const { return points_.size(); }

 private:
  // A virtual node. Its bucket (the top index_bits_ bits of its hash) is
  // implied by its position; `position` keeps the next 32 bits, enough to order
  // points inside a bucket, so a point fits in 8 bytes.
  struct Point {
    uint32_t position;
    uint32_t node;
  };

  PlacementRing() = default;
  size_t FirstPointAtOrAfter(uint64_t key_hash) const;
  size_t BucketOf(uint64_t hash) const { return hash >> (64 - index_bits_); }
  uint32_t PositionInBucket(uint64_t hash) const {
    return static_cast<uint32_t>((hash << index_bits_) >> 32);
  }

  std::vector<PlacementNode> nodes_;
  // A bucket of the hash space: its first point, and the owner of the first
  // point at or after the bucket's start. Most buckets hold no point, so their
  // owner is answered from this one cache line.
  struct Bucket {
    uint32_t first_point;
    uint32_t owner;
  };

  // The ring, sorted by hash.
  std::vector<Point, HugePageAllocator<Point>> points_;
  // Twice as many buckets as points, plus one sentinel.
  std::vector<Bucket, HugePageAllocator<Bucket>> index_;
  int index_bits_ = 1;
};

// The ring position of a chunk: every node and client must agree on it.
uint64_t PlacementHash(const ChunkKey& key);

}  // namespace granary

#endif  // GRANARY_COMMON_PLACEMENT_RING_H_
