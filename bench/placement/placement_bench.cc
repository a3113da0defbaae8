// Placement at cluster scale. Reports, as counters:
//   max_load_over_fair  hash space of the most-loaded member / its weighted
//                       fair share
//   moved_over_minimum  hash space that changed owner when one member leaves
//                       (or, read backwards, joins) / the least any placement
//                       must move (that member's fair share)
// and the time of one lookup, with the ring's points and memory (ring_mib).
// Balance and movement are computed exactly from the ring's arcs, not from
// sampled keys, so they depend neither on the machine's noise nor on
// sampling: at 10,000 members even 10 M keys would give each member only
// 1,000 and about 10% of noise.
//
// Arguments: members, the largest weight (weights are 1..that, seeded), and
// for BM_Balance the points of the average member.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>

#include "bench/placement/ring_measures.h"
#include "common/cluster/placement_ring.h"

namespace granary {
namespace {

constexpr int kKeys = 10'000'000;

std::vector<PlacementNode> ClusterNodes(int count, uint32_t max_weight) {
  std::mt19937 random(42);
  std::vector<PlacementNode> nodes;
  for (int i = 0; i < count; ++i) {
    nodes.push_back(
        {"node-" + std::to_string(i), static_cast<uint32_t>(1 + random() % max_weight)});
  }
  return nodes;
}

PlacementRing BuildRing(std::vector<PlacementNode> nodes,
                        uint32_t points_per_member = PlacementRing::kDefaultPointsPerMember) {
  return *PlacementRing::Build(std::move(nodes), points_per_member);
}

const std::vector<uint64_t>& KeyHashes() {
  static const std::vector<uint64_t> hashes = [] {
    std::vector<uint64_t> out;
    out.reserve(kKeys);
    for (int i = 0; i < kKeys; ++i) {
      ChunkKey key{0x5eed, static_cast<uint64_t>(i / 64), static_cast<uint32_t>(i % 64)};
      out.push_back(PlacementHash(key));
    }
    return out;
  }();
  return hashes;
}

void BM_Balance(benchmark::State& state) {
  auto nodes =
      ClusterNodes(static_cast<int>(state.range(0)), static_cast<uint32_t>(state.range(1)));
  double total_weight = TotalWeight(nodes);
  double worst = 0;
  double worst_over_mean = 0;
  size_t points = 0;
  for (auto _ : state) {
    PlacementRing ring = BuildRing(nodes, static_cast<uint32_t>(state.range(2)));
    points = ring.point_count();
    auto owned = OwnedFractions(ring);
    worst = 0;
    worst_over_mean = 0;
    for (size_t n = 0; n < nodes.size(); ++n) {
      double fair = nodes[n].weight / total_weight;
      worst = std::max(worst, static_cast<double>(owned[n] / fair));
      // A light member's excess measured against the average member's share:
      // what its stray load costs in absolute terms.
      worst_over_mean =
          std::max(worst_over_mean, static_cast<double>((owned[n] - fair) * nodes.size()));
    }
  }
  state.counters["max_load_over_fair"] = worst;
  state.counters["max_excess_over_mean_share"] = worst_over_mean;
  state.counters["ring_points"] = static_cast<double>(points);
}
BENCHMARK(BM_Balance)
    ->Args({1000, 4, 640})
    ->Args({1000, 4, 2560})
    ->Args({1000, 1000, 2560})
    ->Args({40, 1000, 2560})
    ->Args({10000, 4, 2560})
    ->Args({10000, 1000, 2560})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// Five members spread over the list leave in turn; reports the worst and the
// mean ratio.
void BM_Movement(benchmark::State& state) {
  auto nodes =
      ClusterNodes(static_cast<int>(state.range(0)), static_cast<uint32_t>(state.range(1)));
  double total_weight = TotalWeight(nodes);
  double worst = 0;
  double sum = 0;
  int changes = 0;
  for (auto _ : state) {
    PlacementRing before = BuildRing(nodes);
    for (size_t changed = nodes.size() / 100; changed < nodes.size() && changes < 5;
         changed += nodes.size() / 5, ++changes) {
      auto without = nodes;
      without.erase(without.begin() + changed);
      double ratio = static_cast<double>(MovedFraction(before, BuildRing(without)) /
                                         (nodes[changed].weight / total_weight));
      worst = std::max(worst, ratio);
      sum += ratio;
    }
  }
  state.counters["moved_over_minimum"] = worst;
  state.counters["moved_over_minimum_mean"] = sum / changes;
}
BENCHMARK(BM_Movement)
    ->Args({1000, 4})
    ->Args({40, 1000})
    ->Args({10000, 4})
    ->Args({10000, 1000})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

void BM_Lookup(benchmark::State& state) {
  PlacementRing ring = BuildRing(ClusterNodes(1000, 4));
  const auto& hashes = KeyHashes();
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(ring.Owner(hashes[i]));
    i = i + 1 == hashes.size() ? 0 : i + 1;
  }
}
BENCHMARK(BM_Lookup);

void BM_LookupWithKeyHash(benchmark::State& state) {
  PlacementRing ring = BuildRing(
      ClusterNodes(static_cast<int>(state.range(0)), static_cast<uint32_t>(state.range(1))));
  uint64_t i = 0;
  for (auto _ : state) {
    ChunkKey key{0x5eed, i / 64, static_cast<uint32_t>(i % 64)};
    benchmark::DoNotOptimize(ring.Owner(PlacementHash(key)));
    ++i;
  }
  state.counters["ring_mib"] = static_cast<double>(ring.memory_bytes()) / (1 << 20);
}
BENCHMARK(BM_LookupWithKeyHash)->Args({1000, 4})->Args({40, 1000})->Args({10000, 1000});

void BM_PlacementHash(benchmark::State& state) {
  uint64_t i = 0;
  for (auto _ : state) {
    ChunkKey key{0x5eed, i / 64, static_cast<uint32_t>(i % 64)};
    benchmark::DoNotOptimize(PlacementHash(key));
    ++i;
  }
}
BENCHMARK(BM_PlacementHash);

void BM_Build(benchmark::State& state) {
  auto nodes =
      ClusterNodes(static_cast<int>(state.range(0)), static_cast<uint32_t>(state.range(1)));
  for (auto _ : state) benchmark::DoNotOptimize(PlacementRing::Build(nodes));
}
BENCHMARK(BM_Build)
    ->Args({1000, 4})
    ->Args({40, 1000})
    ->Args({10000, 1000})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace granary

BENCHMARK_MAIN();
