// Chunk store reads against a plain pread loop over a file of the same bytes,
// in one run: 128 KiB and 4 MiB chunks, page cache hot (buffered) and cold
// (O_DIRECT after dropping the page cache; needs root), through io_uring and
// the pread fallback; insert throughput against plain pwrite appends; and
// ranged 128 KiB reads of 4 MiB chunks against whole-chunk reads of the same
// store, for several checksum block sizes.
//
// Data lives under $GRANARY_BENCH_DIR (default /var/tmp/granary-store-bench),
// which must be on a real disk, not tmpfs.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "cache_server/store/aligned_buffer.h"
#include "cache_server/store/chunk_store.h"

namespace granary::store {
namespace {

constexpr uint64_t kDataBytes = 256 << 20;
constexpr uint64_t kVersion = 1;

std::string BenchRoot() {
  const char* root = std::getenv("GRANARY_BENCH_DIR");
  return root != nullptr ? root : "/var/tmp/granary-store-bench";
}

ChunkKey Key(uint64_t chunk) {
  return {.dataset_version = kVersion, .file_id = 0, .chunk_index = static_cast<uint32_t>(chunk)};
}

std::string Bytes(uint64_t length, uint64_t seed) {
  std::string bytes(length, '\0');
  uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
  for (uint64_t i = 0; i + 8 <= length; i += 8) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    std::memcpy(bytes.data() + i, &state, 8);
  }
  return bytes;
}

StoreOptions Options(const std::string& root, uint64_t chunk_bytes, bool direct_io,
                     bool use_io_uring, uint64_t checksum_block_bytes = 64 << 10) {
  StoreOptions options;
  options.checksum_block_bytes = checksum_block_bytes;
  options.directories = {root + "/cache"};
  options.index_path = root + "/index";
  options.capacity_bytes = 2 * kDataBytes;
  options.max_chunk_bytes = chunk_bytes;
  options.direct_io = direct_io;
  options.use_io_uring = use_io_uring;
  return options;
}

// A store holding kDataBytes in chunks of `chunk_bytes`, and a plain file of
// the same bytes, built once per chunk size and process.
struct Dataset {
  std::string store_root;
  std::string plain_file;
};

const Dataset& DatasetFor(uint64_t chunk_bytes) {
  static std::map<uint64_t, Dataset> datasets;
  if (auto it = datasets.find(chunk_bytes); it != datasets.end()) return it->second;
  const std::string root = BenchRoot() + "/read-" + std::to_string(chunk_bytes);
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  Dataset dataset{.store_root = root + "/store", .plain_file = root + "/plain"};
  auto store = ChunkStore::Open(Options(dataset.store_root, chunk_bytes, false, true));
  if (!store.ok()) {
    std::cerr << store.status() << "\n";
    std::exit(1);
  }
  std::ofstream plain(dataset.plain_file, std::ios::binary);
  for (uint64_t i = 0; i < kDataBytes / chunk_bytes; ++i) {
    const std::string bytes = Bytes(chunk_bytes, i);
    plain.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!(*store)->Insert(Key(i), static_cast<uint32_t>(chunk_bytes), bytes).ok()) std::exit(1);
  }
  return datasets[chunk_bytes] = dataset;
}

bool DropPageCache(benchmark::State& state) {
  ::sync();
  std::ofstream drop("/proc/sys/vm/drop_caches");
  drop << "3" << std::endl;
  if (!drop) {
    state.SkipWithError("cannot write /proc/sys/vm/drop_caches (needs root)");
    return false;
  }
  return true;
}

// Args: chunk bytes, O_DIRECT after dropping caches (else page cache hot),
// io_uring (else pread).
void BM_StoreRead(benchmark::State& state) {
  const uint64_t chunk_bytes = state.range(0);
  const bool cold = state.range(1) != 0;
  const Dataset& dataset = DatasetFor(chunk_bytes);
  auto store = ChunkStore::Open(Options(dataset.store_root, chunk_bytes, cold, state.range(2)));
  if (!store.ok()) return state.SkipWithError(std::string(store.status().message()).c_str());
  const uint64_t chunks = kDataBytes / chunk_bytes;
  if (cold) {
    if (!DropPageCache(state)) return;
  } else {
    for (uint64_t i = 0; i < chunks; ++i) benchmark::DoNotOptimize((*store)->Read(Key(i)));
  }
  uint64_t next = 0;
  for (auto _ : state) {
    auto data = (*store)->Read(Key(next));
    if (!data.ok()) return state.SkipWithError(std::string(data.status().message()).c_str());
    benchmark::DoNotOptimize(data->data());
    next = (next + 1) % chunks;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * chunk_bytes));
}

// Args: chunk bytes, O_DIRECT after dropping caches (else page cache hot).
void BM_PlainPread(benchmark::State& state) {
  const uint64_t chunk_bytes = state.range(0);
  const bool cold = state.range(1) != 0;
  const Dataset& dataset = DatasetFor(chunk_bytes);
  const int fd = ::open(dataset.plain_file.c_str(), O_RDONLY | (cold ? O_DIRECT : 0));
  if (fd < 0) return state.SkipWithError("cannot open the plain file");
  AlignedBuffer buffer(chunk_bytes);
  const uint64_t chunks = kDataBytes / chunk_bytes;
  if (cold) {
    if (!DropPageCache(state)) return;
  } else {
    for (uint64_t i = 0; i < chunks; ++i) {
      benchmark::DoNotOptimize(::pread(fd, buffer.data(), chunk_bytes, i * chunk_bytes));
    }
  }
  uint64_t next = 0;
  for (auto _ : state) {
    const ssize_t n = ::pread(fd, buffer.data(), chunk_bytes, next * chunk_bytes);
    if (n != static_cast<ssize_t>(chunk_bytes)) return state.SkipWithError("short pread");
    benchmark::DoNotOptimize(buffer.data());
    next = (next + 1) % chunks;
  }
  ::close(fd);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * chunk_bytes));
}

// Args: chunk bytes, io_uring (else pread). Inserts into an inactive store of
// twice kDataBytes, so that eviction runs once it is full.
void BM_StoreInsert(benchmark::State& state) {
  const uint64_t chunk_bytes = state.range(0);
  const std::string root = BenchRoot() + "/insert";
  std::filesystem::remove_all(root);
  {
    auto store = ChunkStore::Open(Options(root, chunk_bytes, false, state.range(1)));
    if (!store.ok()) return state.SkipWithError(std::string(store.status().message()).c_str());
    const std::string bytes = Bytes(chunk_bytes, 1);
    uint64_t next = 0;
    for (auto _ : state) {
      auto stored = (*store)->Insert(Key(next++), static_cast<uint32_t>(chunk_bytes), bytes);
      if (!stored.ok() || !*stored) return state.SkipWithError("insert failed");
    }
  }
  std::filesystem::remove_all(root);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * chunk_bytes));
}

// Args: chunk bytes. Appends to a file, wrapping at twice kDataBytes.
void BM_PlainPwrite(benchmark::State& state) {
  const uint64_t chunk_bytes = state.range(0);
  const std::string path = BenchRoot() + "/pwrite";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return state.SkipWithError("cannot create the plain file");
  const std::string bytes = Bytes(chunk_bytes, 1);
  uint64_t offset = 0;
  for (auto _ : state) {
    if (::pwrite(fd, bytes.data(), chunk_bytes, offset) != static_cast<ssize_t>(chunk_bytes)) {
      return state.SkipWithError("short pwrite");
    }
    offset = (offset + chunk_bytes) % (2 * kDataBytes);
  }
  ::close(fd);
  std::filesystem::remove(path);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * chunk_bytes));
}

constexpr int64_t kSmall = 128 << 10;
constexpr int64_t kLarge = 4 << 20;

// 4 MiB chunks, kRangeDataBytes of them per checksum block size.
constexpr uint64_t kRangeDataBytes = 64 << 20;
constexpr uint64_t kRangeChunks = kRangeDataBytes / kLarge;

// The root of a store of kRangeChunks chunks with `block_bytes` checksum
// blocks, built once per block size and process.
const std::string& RangeStoreFor(uint64_t block_bytes) {
  static std::map<uint64_t, std::string> roots;
  if (auto it = roots.find(block_bytes); it != roots.end()) return it->second;
  const std::string root = BenchRoot() + "/range-" + std::to_string(block_bytes);
  std::filesystem::remove_all(root);
  auto store = ChunkStore::Open(Options(root, kLarge, false, true, block_bytes));
  if (!store.ok()) {
    std::cerr << store.status() << "\n";
    std::exit(1);
  }
  for (uint64_t i = 0; i < kRangeChunks; ++i) {
    if (!(*store)->Insert(Key(i), kLarge, Bytes(kLarge, i)).ok()) std::exit(1);
  }
  return roots[block_bytes] = root;
}

enum RangeKind : int64_t {
  kWholeChunk = 0,    // Read(): the whole 4 MiB chunk.
  kAlignedRange = 1,  // ReadRange(): 128 KiB at a multiple of 128 KiB, as FUSE asks.
  kAnyRange = 2,      // ReadRange(): 128 KiB at any 4 KiB-aligned offset.
};

// Args: checksum block bytes, O_DIRECT (else page cache hot), RangeKind.
// Chunks and offsets are drawn at random (seeded) in every case.
void BM_StoreReadRange(benchmark::State& state) {
  const uint64_t block_bytes = state.range(0);
  const bool direct = state.range(1) != 0;
  const auto kind = static_cast<RangeKind>(state.range(2));
  auto store = ChunkStore::Open(Options(RangeStoreFor(block_bytes), kLarge, direct, true));
  if (!store.ok()) return state.SkipWithError(std::string(store.status().message()).c_str());
  if (!direct) {
    for (uint64_t i = 0; i < kRangeChunks; ++i) benchmark::DoNotOptimize((*store)->Read(Key(i)));
  }
  std::mt19937_64 random(7);
  const uint64_t read_before = (*store)->Stats().read_bytes;
  for (auto _ : state) {
    const ChunkKey key = Key(random() % kRangeChunks);
    absl::StatusOr<std::string> data;
    if (kind == kWholeChunk) {
      data = (*store)->Read(key);
    } else {
      const uint64_t step = kind == kAlignedRange ? kSmall : kBlockBytes;
      data = (*store)->ReadRange(key, random() % ((kLarge - kSmall) / step + 1) * step, kSmall);
    }
    if (!data.ok()) return state.SkipWithError(std::string(data.status().message()).c_str());
    benchmark::DoNotOptimize(data->data());
  }
  const uint64_t served = kind == kWholeChunk ? kLarge : kSmall;
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * served));
  // Bytes read from data files per byte returned.
  state.counters["amplification"] =
      static_cast<double>((*store)->Stats().read_bytes - read_before) /
      static_cast<double>(state.iterations() * served);
}

BENCHMARK(BM_PlainPread)
    ->ArgNames({"chunk", "cold"})
    ->ArgsProduct({{kSmall, kLarge}, {0, 1}})
    ->UseRealTime();
BENCHMARK(BM_StoreRead)
    ->ArgNames({"chunk", "cold", "uring"})
    ->ArgsProduct({{kSmall, kLarge}, {0, 1}, {1, 0}})
    ->UseRealTime();
BENCHMARK(BM_StoreReadRange)
    ->ArgNames({"block", "direct", "range"})
    ->ArgsProduct({{64 << 10}, {0, 1}, {kWholeChunk}})
    ->ArgsProduct({{16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10},
                   {0, 1},
                   {kAlignedRange, kAnyRange}})
    ->UseRealTime();
BENCHMARK(BM_PlainPwrite)->ArgNames({"chunk"})->Args({kSmall})->Args({kLarge})->UseRealTime();
BENCHMARK(BM_StoreInsert)
    ->ArgNames({"chunk", "uring"})
    ->ArgsProduct({{kSmall, kLarge}, {1, 0}})
    ->UseRealTime();

}  // namespace
}  // namespace granary::store

BENCHMARK_MAIN();
