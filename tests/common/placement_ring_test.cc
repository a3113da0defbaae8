#include "common/cluster/placement_ring.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "common/dataset/hash.h"

namespace granary {
namespace {

std::vector<PlacementNode> Nodes(int count) {
  std::vector<PlacementNode> nodes;
  for (int i = 0; i < count; ++i) {
    nodes.push_back({"node-" + std::to_string(i), static_cast<uint32_t>(1 + i % 4)});
  }
  return nodes;
}

std::vector<std::string> OwnerIds(const PlacementRing& ring, int keys) {
  std::vector<std::string> owners;
  for (int i = 0; i < keys; ++i) {
    ChunkKey key{7, static_cast<uint64_t>(i / 16), static_cast<uint32_t>(i % 16)};
    owners.push_back(ring.nodes()[ring.Owner(PlacementHash(key))].id);
  }
  return owners;
}

TEST(PlacementRing, RejectsBadMemberLists) {
  EXPECT_EQ(PlacementRing::Build({}).status().code(), absl::StatusCode::kInvalidArgument);
  auto duplicate = PlacementRing::Build({{"a", 1}, {"a", 2}});
  EXPECT_NE(duplicate.status().message().find("'a'"), std::string::npos);
  EXPECT_FALSE(PlacementRing::Build({{"", 1}}).ok());
  auto heavy = PlacementRing::Build({{"a", 0}});
  EXPECT_NE(heavy.status().message().find("weight 0"), std::string::npos);
}

TEST(PlacementRing, SameMembersInAnyOrderGiveTheSameOwners) {
  auto nodes = Nodes(20);
  auto forward = PlacementRing::Build(nodes);
  std::reverse(nodes.begin(), nodes.end());
  auto backward = PlacementRing::Build(nodes);
  ASSERT_TRUE(forward.ok() && backward.ok());
  EXPECT_EQ(OwnerIds(*forward, 20000), OwnerIds(*backward, 20000));
}

TEST(PlacementRing, LoadFollowsWeight) {
  auto ring = PlacementRing::Build(Nodes(40));
  ASSERT_TRUE(ring.ok());
  std::map<std::string, int> load;
  constexpr int kKeys = 400000;
  for (const std::string& owner : OwnerIds(*ring, kKeys)) ++load[owner];
  uint64_t total_weight = 0;
  for (const auto& node : ring->nodes()) total_weight += node.weight;
  for (const auto& node : ring->nodes()) {
    double fair = static_cast<double>(kKeys) * node.weight / total_weight;
    EXPECT_NEAR(load[node.id] / fair, 1.0, 0.12) << node.id;
  }
}

TEST(PlacementRing, RemovingANodeMovesOnlyItsKeys) {
  auto nodes = Nodes(30);
  auto before = PlacementRing::Build(nodes);
  nodes.erase(nodes.begin() + 11);
  auto after = PlacementRing::Build(nodes);
  auto owners_before = OwnerIds(*before, 100000);
  auto owners_after = OwnerIds(*after, 100000);
  for (size_t i = 0; i < owners_before.size(); ++i) {
    if (owners_before[i] != "node-11") {
      EXPECT_EQ(owners_before[i], owners_after[i]);
    }
  }
}

TEST(PlacementRing, OwnersAreDistinctAndStartWithTheOwner) {
  auto ring = PlacementRing::Build(Nodes(5));
  for (uint64_t hash : {0ull, 1ull << 63, ~0ull, 12345ull}) {
    auto owners = ring->Owners(hash, 3);
    ASSERT_EQ(owners.size(), 3u);
    EXPECT_EQ(owners[0], ring->Owner(hash));
    EXPECT_NE(owners[0], owners[1]);
    EXPECT_NE(owners[1], owners[2]);
    EXPECT_NE(owners[0], owners[2]);
    EXPECT_EQ(ring->Owners(hash, 10).size(), 5u);
  }
}

// Owner() answers from a line's inline offsets, and Owners() walks the full
// points: they must agree everywhere, including in lines with more points
// than fit inline and for keys whose top bits equal a point's.
TEST(PlacementRing, OwnerAgreesWithTheFullPoints) {
  auto nodes = Nodes(40);
  auto ring = PlacementRing::Build(nodes);
  ASSERT_TRUE(ring.ok());
  std::mt19937_64 random(7);
  for (int i = 0; i < 1'000'000; ++i) {
    uint64_t hash = random();
    ASSERT_EQ(ring->Owner(hash), ring->Owners(hash, 1)[0]) << hash;
  }
  for (const PlacementNode& node : nodes) {
    for (uint64_t p = 0; p < 64; ++p) {
      Xxh3Stream point;  // A point's own hash, as the ring makes it.
      point.Update(node.id);
      point.UpdateU64(p);
      for (uint64_t hash : {point.Digest() - 1, point.Digest(), point.Digest() + 1}) {
        ASSERT_EQ(ring->Owner(hash), ring->Owners(hash, 1)[0]) << hash;
      }
    }
  }
}

// Arcs() describes the same ring lookups use: every key belongs to the arc
// whose end is the first at or after it, wrapping to the first arc.
TEST(PlacementRing, ArcsNameTheOwnerOfEveryKey) {
  auto ring = PlacementRing::Build(Nodes(40));
  ASSERT_TRUE(ring.ok());
  auto arcs = ring->Arcs();
  ASSERT_EQ(arcs.size(), ring->point_count());
  ASSERT_TRUE(std::is_sorted(arcs.begin(), arcs.end(),
                             [](const auto& a, const auto& b) { return a.end < b.end; }));
  std::mt19937_64 random(11);
  for (int i = 0; i < 1'000'000; ++i) {
    uint64_t hash = random();
    auto arc = std::lower_bound(arcs.begin(), arcs.end(), hash,
                                [](const auto& arc, uint64_t key) { return arc.end < key; });
    ASSERT_EQ(ring->Owner(hash), arc == arcs.end() ? arcs.front().node : arc->node) << hash;
  }
}

std::vector<PlacementNode> AlternatingWeights(int count, uint32_t light, uint32_t heavy) {
  std::vector<PlacementNode> nodes;
  for (int i = 0; i < count; ++i) {
    nodes.push_back({"node-" + std::to_string(i), i % 2 ? heavy : light});
  }
  return nodes;
}

// Racks of 40 with weights 1-1000: whichever member leaves, and however that
// moves the mean weight, only its keys change owner.
TEST(PlacementRing, AnyLeaveInARackOfMixedWeightsMovesOnlyTheLeaversKeys) {
  std::mt19937 random(11);
  for (int rack = 0; rack < 10; ++rack) {
    std::vector<PlacementNode> nodes;
    for (int i = 0; i < 40; ++i) {
      nodes.push_back({"node-" + std::to_string(i), static_cast<uint32_t>(1 + random() % 1000)});
    }
    auto before = PlacementRing::Build(nodes);
    ASSERT_TRUE(before.ok());
    auto owners_before = OwnerIds(*before, 5000);
    for (size_t leaver = 0; leaver < nodes.size(); ++leaver) {
      auto without = nodes;
      without.erase(without.begin() + static_cast<std::ptrdiff_t>(leaver));
      auto after = PlacementRing::Build(without);
      ASSERT_TRUE(after.ok());
      auto owners_after = OwnerIds(*after, 5000);
      int moved_others = 0;
      for (size_t i = 0; i < owners_before.size(); ++i) {
        if (owners_before[i] != nodes[leaver].id && owners_before[i] != owners_after[i]) {
          ++moved_others;
        }
      }
      EXPECT_EQ(moved_others, 0) << "rack " << rack << ": " << nodes[leaver].id << " of weight "
                                 << nodes[leaver].weight << " left";
    }
  }
}

// Points follow relative weight, not its scale: weights 500 and 1,000 make a
// ring of the size weights 1 and 2 make, and load still follows weight.
TEST(PlacementRing, RingSizeDoesNotDependOnTheScaleOfWeights) {
  auto small = PlacementRing::Build(AlternatingWeights(100, 1, 2));
  auto heavy_nodes = AlternatingWeights(100, 500, 1000);
  auto heavy = PlacementRing::Build(heavy_nodes);
  ASSERT_TRUE(small.ok() && heavy.ok());
  EXPECT_GE(heavy->point_count() * 2, small->point_count());
  EXPECT_LE(heavy->point_count(), small->point_count() * 2);
  EXPECT_LE(heavy->point_count(), 100 * PlacementRing::kDefaultPointsPerMember * 3 / 2);
  std::map<std::string, int> load;
  constexpr int kKeys = 400000;
  for (const std::string& owner : OwnerIds(*heavy, kKeys)) ++load[owner];
  for (const auto& node : heavy_nodes) {
    double fair = static_cast<double>(kKeys) * node.weight / 75000;
    EXPECT_NEAR(load[node.id] / fair, 1.0, 0.12) << node.id;
  }
}

// A group too large for the default points per member stays within
// kMaxPoints, and so within the memory bound of one ring.
TEST(PlacementRing, PointsStayBoundedInTheLargestGroups) {
  std::vector<PlacementNode> nodes;
  std::mt19937 random(3);
  for (int i = 0; i < 10000; ++i) {
    nodes.push_back({"node-" + std::to_string(i), static_cast<uint32_t>(1 + random() % 1000)});
  }
  auto ring = PlacementRing::Build(nodes);
  ASSERT_TRUE(ring.ok());
  EXPECT_LE(ring->point_count(), PlacementRing::kMaxPoints + nodes.size());
  EXPECT_GT(ring->point_count(), PlacementRing::kMaxPoints / 4);
  EXPECT_LE(ring->memory_bytes(), size_t{64} << 20);
}

TEST(PlacementRing, RejectsMoreNodesThanOwnersCanName) {
  std::vector<PlacementNode> nodes;
  for (size_t i = 0; i <= PlacementRing::kMaxNodes; ++i) nodes.push_back({std::to_string(i), 1});
  EXPECT_EQ(PlacementRing::Build(nodes).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PlacementRing, SingleNodeOwnsEverything) {
  auto ring = PlacementRing::Build({{"solo", 1}});
  for (uint64_t hash : {0ull, ~0ull, 99ull}) EXPECT_EQ(ring->Owner(hash), 0u);
}

}  // namespace
}  // namespace granary
