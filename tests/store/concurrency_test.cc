// Eight threads read (whole chunks and ranges), write, evict and remove
// overlapping chunks at once, and store blocks of the same chunks at once;
// run under ThreadSanitizer by scripts/test.sh. Every successful read must
// return exactly the bytes of its key.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "cache_server/store/chunk_store.h"
#include "tests/store/store_test_util.h"

namespace granary::store {
namespace {

using testing::ChunkBytes;
using testing::ScratchDir;
using testing::SmallStoreOptions;

constexpr int kThreads = 8;
constexpr int kOperationsPerThread = 1500;
constexpr uint32_t kChunksPerVersion = 48;

uint64_t LengthOf(const ChunkKey& key) { return 1 + (key.chunk_index * 7919) % (48 << 10); }

class Concurrency : public ::testing::TestWithParam<bool> {};

TEST_P(Concurrency, OverlappingReadersAndWritersSeeOnlyWholeChunks) {
  ScratchDir dir;
  StoreOptions options = SmallStoreOptions(dir, 1 << 20, 64 << 10);
  options.directories = {dir.Sub("nvme0"), dir.Sub("nvme1")};
  options.checksum_block_bytes = 8 << 10;  // Ranges span several blocks of these chunks.
  options.use_io_uring = GetParam();
  auto opened = ChunkStore::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status();
  ChunkStore& store = **opened;
  std::atomic<uint64_t> hits{0};
  std::atomic<uint64_t> wrong{0};
  std::atomic<uint64_t> errors{0};

  auto work = [&](int thread) {
    std::mt19937_64 random(thread);
    for (int op = 0; op < kOperationsPerThread; ++op) {
      const auto chunk = static_cast<uint32_t>(random() % kChunksPerVersion);
      const ChunkKey key{
          .dataset_version = 1 + random() % 3, .file_id = chunk % 8, .chunk_index = chunk};
      switch (random() % 16) {
        case 0:
          store.SetVersionState(key.dataset_version,
                                static_cast<VersionState>(random() % 2));  // Never pinned.
          break;
        case 1:
          if (op % 50 == 0 && !store.RemoveVersion(key.dataset_version).ok()) errors++;
          break;
        case 2:
          store.Contains(key);
          store.CachedBytes(key.dataset_version);
          store.Stats();
          break;
        case 3:
        case 4:
        case 5:
        case 6:
        case 7:
          if (!store.Insert(key, testing::kAnyChunkSize, ChunkBytes(key, LengthOf(key))).ok())
            errors++;
          break;
        case 8:
        case 9:
        case 10: {
          const uint64_t length = LengthOf(key);
          const uint64_t offset = random() % length;
          const uint64_t size = random() % (length - offset + 1);
          if (auto read = store.ReadRange(key, offset, size); read.ok()) {
            hits++;
            if (*read != ChunkBytes(key, length).substr(offset, size)) wrong++;
          } else if (read.status().code() != absl::StatusCode::kNotFound) {
            errors++;
          }
          break;
        }
        default:
          if (auto read = store.Read(key); read.ok()) {
            hits++;
            if (*read != ChunkBytes(key, LengthOf(key))) wrong++;
          } else if (read.status().code() != absl::StatusCode::kNotFound) {
            errors++;
          }
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(work, t);
  for (auto& thread : threads) thread.join();

  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(errors, 0u);
  EXPECT_GT(hits, 0u);
  const StoreStats stats = store.Stats();
  EXPECT_EQ(stats.checksum_failures, 0u);
  EXPECT_LE(stats.disk_bytes, options.capacity_bytes);
  EXPECT_EQ(stats.disk_bytes, testing::DataFileBytes(options));
  uint64_t indexed_bytes = 0;
  for (uint64_t version : {1, 2, 3}) {
    for (const ChunkKey& key : store.ChunksOf(version)) indexed_bytes += LengthOf(key);
    EXPECT_EQ(store.CachedBytes(version) > 0, !store.ChunksOf(version).empty());
  }
  EXPECT_EQ(stats.used_bytes, indexed_bytes);
}

TEST_P(Concurrency, BlocksOfOneChunkStoredAtOnceMergeAndAreCountedOnce) {
  ScratchDir dir;
  StoreOptions options = SmallStoreOptions(dir, 16 << 20, 64 << 10);
  constexpr uint64_t kBlock = 8 << 10;
  options.checksum_block_bytes = kBlock;
  options.partial_block_bytes = kBlock;
  // Chunks of versions with chunks of 64 KiB: held in part in 8 KiB blocks.
  constexpr uint32_t kChunkSize = 64 << 10;
  options.use_io_uring = GetParam();
  auto opened = ChunkStore::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status();
  ChunkStore& store = **opened;
  constexpr uint32_t kChunks = 6;
  std::atomic<uint64_t> wrong{0};
  std::atomic<uint64_t> errors{0};
  auto work = [&](int thread) {
    std::mt19937_64 random(100 + thread);
    for (int op = 0; op < 400; ++op) {
      const ChunkKey key{.dataset_version = 1,
                         .file_id = 0,
                         .chunk_index = static_cast<uint32_t>(random() % kChunks)};
      const uint64_t length = LengthOf(key);
      const std::string bytes = ChunkBytes(key, length);
      const uint64_t blocks = (length + kBlock - 1) / kBlock;
      const uint64_t first = random() % blocks;
      const uint64_t count = 1 + random() % (blocks - first);
      switch (random() % 8) {
        case 0:
          if (!store.Insert(key, kChunkSize, bytes).ok()) errors++;
          break;
        case 1:
        case 2:
        case 3:
          if (!store
                   .InsertBlocks(key, kChunkSize, static_cast<uint32_t>(length), first * kBlock,
                                 bytes.substr(first * kBlock, count * kBlock))
                   .ok()) {
            errors++;
          }
          break;
        default: {
          const uint64_t offset = random() % length;
          const uint64_t size = random() % (length - offset + 1);
          if (auto read = store.ReadRange(key, offset, size); read.ok()) {
            if (*read != bytes.substr(offset, size)) wrong++;
          } else if (read.status().code() != absl::StatusCode::kNotFound) {
            errors++;
          }
        }
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(work, t);
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(errors, 0u);
  // What each chunk holds, block by block, is what the store counts.
  uint64_t held_bytes = 0;
  for (uint32_t chunk = 0; chunk < kChunks; ++chunk) {
    const ChunkKey key{.dataset_version = 1, .file_id = 0, .chunk_index = chunk};
    const uint64_t length = LengthOf(key);
    for (uint64_t at = 0; at < length; at += kBlock) {
      const uint64_t size = std::min(kBlock, length - at);
      if (auto read = store.ReadRange(key, at, size); read.ok()) {
        EXPECT_EQ(*read, ChunkBytes(key, length).substr(at, size));
        held_bytes += size;
      }
    }
  }
  const StoreStats stats = store.Stats();
  EXPECT_EQ(stats.used_bytes, held_bytes);
  EXPECT_EQ(stats.disk_bytes, testing::DataFileBytes(options));
  EXPECT_EQ(stats.checksum_failures, 0u);
}

INSTANTIATE_TEST_SUITE_P(IoEngines, Concurrency, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "IoUring" : "Pread"; });

}  // namespace
}  // namespace granary::store
