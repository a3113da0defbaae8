// Placement at cluster scale: 1,000 nodes with weights 1-4 and 10 million chunk
// keys. Reports, as counters:
//   max_load_over_fair  load of the most-loaded node / its weighted fair share
//   moved_over_minimum  keys that changed owner when one node leaves or joins /
//                       the least any placement must move (that node's fair share)
// and the time of one lookup, with the ring's memory (ring_mib). Quality figures are exact counts,
// not timings, so they do not depend on the machine's noise.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>

#include "common/placement_ring.h"

namespace granary {
namespace {

constexpr int kNodes = 1000;
constexpr int kKeys = 10'000'000;

std::vector<PlacementNode> ClusterNodes(int count) {
  std::mt19937 random(42);
  std::vector<PlacementNode> nodes;
  for (int i = 0; i < count; ++i) {
    nodes.push_back({"node-" + std::to_string(i), static_cast<uint32_t>(1 + random() % 4)});
  }
  return nodes;
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

std::vector<uint32_t> Assign(const PlacementRing& ring) {
  std::vector<uint32_t> owners;
  owners.reserve(kKeys);
  for (uint64_t hash : KeyHashes()) owners.push_back(ring.Owner(hash));
  return owners;
}

double TotalWeight(const std::vector<PlacementNode>& nodes) {
  double total = 0;
  for (const auto& node : nodes) total += node.weight;
  return total;
}

void BM_Balance(benchmark::State& state) {
  auto nodes = ClusterNodes(kNodes);
  auto ring = PlacementRing::Build(nodes, static_cast<uint32_t>(state.range(0)));
  double worst = 0;
  for (auto _ : state) {
    std::vector<uint64_t> load(kNodes, 0);
    for (uint32_t owner : Assign(*ring)) ++load[owner];
    double total_weight = TotalWeight(nodes);
    worst = 0;
    for (int n = 0; n < kNodes; ++n) {
      double fair = kKeys * nodes[n].weight / total_weight;
      worst = std::max(worst, load[n] / fair);
    }
  }
  state.counters["max_load_over_fair"] = worst;
  state.counters["ring_points"] = static_cast<double>(ring->point_count());
}
BENCHMARK(BM_Balance)->Arg(256)->Arg(1024)->Arg(1536)->Iterations(1)->Unit(benchmark::kMillisecond);

// Moved keys over the minimum when node `changed` leaves (or, read backwards,
// joins): the minimum is that node's fair share of the keys.
void BM_Movement(benchmark::State& state) {
  auto nodes = ClusterNodes(kNodes);
  const int changed = 500;
  auto without = nodes;
  without.erase(without.begin() + changed);
  double ratio = 0;
  for (auto _ : state) {
    auto before = Assign(*PlacementRing::Build(nodes));
    auto ring_after = PlacementRing::Build(without);
    uint64_t moved = 0;
    for (size_t i = 0; i < before.size(); ++i) {
      const std::string& old_owner = nodes[before[i]].id;
      const std::string& new_owner = without[ring_after->Owner(KeyHashes()[i])].id;
      if (old_owner != new_owner) ++moved;
    }
    double minimum = kKeys * nodes[changed].weight / TotalWeight(nodes);
    ratio = moved / minimum;
  }
  state.counters["moved_over_minimum"] = ratio;
}
BENCHMARK(BM_Movement)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_Lookup(benchmark::State& state) {
  auto ring = PlacementRing::Build(ClusterNodes(kNodes));
  const auto& hashes = KeyHashes();
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(ring->Owner(hashes[i]));
    i = i + 1 == hashes.size() ? 0 : i + 1;
  }
}
BENCHMARK(BM_Lookup);

void BM_LookupWithKeyHash(benchmark::State& state) {
  auto ring = PlacementRing::Build(ClusterNodes(kNodes));
  uint64_t i = 0;
  for (auto _ : state) {
    ChunkKey key{0x5eed, i / 64, static_cast<uint32_t>(i % 64)};
    benchmark::DoNotOptimize(ring->Owner(PlacementHash(key)));
    ++i;
  }
  state.counters["ring_mib"] = static_cast<double>(ring->memory_bytes()) / (1 << 20);
}
BENCHMARK(BM_LookupWithKeyHash);

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
  auto nodes = ClusterNodes(kNodes);
  for (auto _ : state) benchmark::DoNotOptimize(PlacementRing::Build(nodes));
}
BENCHMARK(BM_Build)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace granary

BENCHMARK_MAIN();
