// What a name lookup costs in granary-fuse's directory tables (the LOOKUP of
// every open after the kernel dropped its dentries), in random order, in
// directories of 1,000 short generated names, and of 1,000 and 100,000 image
// names with a long common prefix; and the tables' bytes per node.
//
//   build/bench/fuse/mount_lookup_bench
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "fuse_client/operations/inode_table.h"

namespace granary::fuse {
namespace {

ManifestEntry Entry(std::string path, EntryType type) {
  ManifestEntry entry;
  entry.path = std::move(path);
  entry.type = type;
  entry.mode = type == EntryType::kDirectory ? 040755 : 0100644;
  return entry;
}

// `files` files in directories of `per_directory`, named as the bench's
// ten-million-file tree names them (d0001/f001234) or, with `long_names`, as
// an image dataset does (train/class-00001/img-000001234.jpg).
struct Tree {
  MountedDataset dataset;
  std::vector<std::pair<uint64_t, std::string>> lookups;  // (directory node, name)
};

Tree MakeTree(int files, int per_directory, bool long_names) {
  ManifestEntries entries;
  entries.push_back(Entry("", EntryType::kDirectory));
  const std::string top = long_names ? "train/" : "";
  if (long_names) entries.push_back(Entry("train", EntryType::kDirectory));
  std::vector<std::pair<std::string, std::string>> names;  // (directory, name)
  for (int i = 0; i < files; ++i) {
    const std::string directory =
        top + (long_names ? absl::StrFormat("class-%05d", i / per_directory)
                          : absl::StrFormat("d%04d", i / per_directory));
    if (i % per_directory == 0) entries.push_back(Entry(directory, EntryType::kDirectory));
    const std::string name =
        long_names ? absl::StrFormat("img-%09d.jpg", i) : absl::StrFormat("f%06d", i);
    entries.push_back(Entry(directory + "/" + name, EntryType::kFile));
    names.emplace_back(directory, name);
  }
  auto manifest = Manifest::Build({"ds", "/src", 4 << 20}, std::move(entries));
  Tree tree{MountedDataset(0, DatasetSnapshot{{}, *std::move(manifest)}), {}};
  std::mt19937_64 random(7);
  std::shuffle(names.begin(), names.end(), random);
  for (const auto& [directory, name] : names) {
    uint64_t node = 0;
    size_t begin = 0;
    while (begin < directory.size()) {
      size_t end = directory.find('/', begin);
      if (end == std::string::npos) end = directory.size();
      node = *tree.dataset.Lookup(node, std::string_view(directory).substr(begin, end - begin));
      begin = end + 1;
    }
    tree.lookups.emplace_back(node, name);
  }
  return tree;
}

void BM_Lookup(benchmark::State& state) {
  const Tree tree = MakeTree(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
                             state.range(2) != 0);
  size_t next = 0;
  for (auto _ : state) {
    const auto& [directory, name] = tree.lookups[next];
    benchmark::DoNotOptimize(tree.dataset.Lookup(directory, name));
    if (++next == tree.lookups.size()) next = 0;
  }
  state.counters["bytes_per_node"] =
      static_cast<double>(tree.dataset.memory_bytes()) / tree.dataset.node_count();
}
BENCHMARK(BM_Lookup)
    ->ArgNames({"files", "per_dir", "long"})
    ->Args({1'000'000, 1'000, 0})
    ->Args({1'000'000, 100'000, 1})
    ->Args({1'000'000, 1'000, 1});

}  // namespace
}  // namespace granary::fuse

BENCHMARK_MAIN();
