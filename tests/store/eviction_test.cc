// Capacity is a hard bound on data file bytes on disk, and eviction keeps
// epoch-style access from thrashing.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <thread>

#include "cache_server/store/chunk_store.h"
#include "tests/store/store_test_util.h"

namespace granary::store {
namespace {

using testing::ChunkBytes;
using testing::DataFileBytes;
using testing::ScratchDir;
using testing::SmallStoreOptions;

// Each chunk is a small file of its own, as images are, so that eviction,
// which reclaims whole data files, chooses chunk by chunk.
ChunkKey Key(uint64_t version, uint32_t chunk) {
  return {.dataset_version = version, .file_id = chunk, .chunk_index = 0};
}

class Capacity : public ::testing::TestWithParam<VersionState> {};

TEST_P(Capacity, ThreeTimesCapacityNeverExceedsTheBoundOnDisk) {
  ScratchDir dir;
  constexpr uint64_t kCapacity = 8 << 20;
  StoreOptions options = SmallStoreOptions(dir, kCapacity, 256 << 10);
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  for (uint64_t version : {1, 2, 3}) (*store)->SetVersionState(version, GetParam());
  std::mt19937_64 random(7);
  uint64_t inserted = 0;
  uint64_t admitted = 0;
  for (uint32_t i = 0; inserted < 3 * kCapacity; ++i) {
    const ChunkKey key = Key(1 + i % 3, i);
    const uint64_t length = 1 + random() % (256 << 10);
    auto stored = (*store)->Insert(key, testing::kAnyChunkSize, ChunkBytes(key, length));
    ASSERT_TRUE(stored.ok()) << stored.status();
    inserted += length;
    admitted += *stored;
    ASSERT_LE(DataFileBytes(options), kCapacity) << "after " << inserted << " bytes";
    ASSERT_EQ((*store)->Stats().disk_bytes, DataFileBytes(options));
  }
  const StoreStats stats = (*store)->Stats();
  EXPECT_GT(stats.disk_bytes, kCapacity / 2) << "the store should fill up";
  if (GetParam() == VersionState::kInactive) {
    EXPECT_GT(stats.evicted_chunks, 0u);
    EXPECT_EQ(stats.admissions_refused, 0u);
  } else {
    EXPECT_EQ(stats.evicted_chunks, 0u);
    EXPECT_GT(stats.admissions_refused, 0u);
  }
  EXPECT_EQ(admitted, stats.inserts);
}

INSTANTIATE_TEST_SUITE_P(States, Capacity,
                         ::testing::Values(VersionState::kInactive, VersionState::kActive,
                                           VersionState::kPinned, VersionState::kHeld),
                         [](const auto& info) {
                           switch (info.param) {
                             case VersionState::kInactive:
                               return "Inactive";
                             case VersionState::kActive:
                               return "Active";
                             case VersionState::kPinned:
                               return "Pinned";
                             case VersionState::kHeld:
                               return "Held";
                           }
                           return "Unknown";
                         });

TEST(Eviction, InactiveVersionsGoFirstLeastRecentlyUsedFirst) {
  ScratchDir dir;
  StoreOptions options = SmallStoreOptions(dir, 1 << 20, 64 << 10);
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  (*store)->SetVersionState(1, VersionState::kActive);
  // 8 active and 8 inactive chunks fill the store.
  for (uint32_t i = 0; i < 8; ++i) {
    ASSERT_TRUE(
        *(*store)->Insert(Key(1, i), testing::kAnyChunkSize, ChunkBytes(Key(1, i), 64 << 10)));
    ASSERT_TRUE(
        *(*store)->Insert(Key(2, i), testing::kAnyChunkSize, ChunkBytes(Key(2, i), 64 << 10)));
  }
  // Touch inactive chunk 0 so that chunk 1 is the least recently used.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE((*store)->Read(Key(2, 0)).ok());
  ASSERT_TRUE(
      *(*store)->Insert(Key(3, 0), testing::kAnyChunkSize, ChunkBytes(Key(3, 0), 64 << 10)));
  EXPECT_TRUE((*store)->Contains(Key(2, 0)));
  EXPECT_FALSE((*store)->Contains(Key(2, 1)));
  for (uint32_t i = 0; i < 8; ++i) EXPECT_TRUE((*store)->Contains(Key(1, i)));
  // Once only active data is left, new active chunks are declined (after
  // what room eviction left over), and no active chunk is evicted for them.
  (*store)->SetVersionState(2, VersionState::kActive);
  (*store)->SetVersionState(3, VersionState::kActive);
  const std::vector<ChunkKey> held = (*store)->ChunksOf(2);
  bool declined = false;
  for (uint32_t i = 100; i < 120 && !declined; ++i) {
    auto stored =
        (*store)->Insert(Key(1, i), testing::kAnyChunkSize, ChunkBytes(Key(1, i), 64 << 10));
    ASSERT_TRUE(stored.ok()) << stored.status();
    declined = !*stored;
  }
  EXPECT_TRUE(declined);
  EXPECT_EQ((*store)->Stats().admissions_refused, 1u);
  for (uint32_t i = 0; i < 8; ++i) EXPECT_TRUE((*store)->Contains(Key(1, i)));
  for (const ChunkKey& key : held) EXPECT_TRUE((*store)->Contains(key));
}

// Reads a dataset of 2 × capacity for 5 epochs, each in a fresh random order,
// inserting every miss as a read-through cache would. Returns the hit rate of
// each epoch.
std::vector<double> EpochHitRates(EvictionMode mode) {
  ScratchDir dir;
  constexpr uint64_t kChunkBytes = 4096;
  constexpr uint32_t kCapacityChunks = 256;
  StoreOptions options = SmallStoreOptions(dir, kCapacityChunks * kChunkBytes, kChunkBytes);
  options.eviction = mode;
  auto store = ChunkStore::Open(options);
  EXPECT_TRUE(store.ok()) << store.status();
  if (!store.ok()) return {};
  (*store)->SetVersionState(1, VersionState::kActive);
  std::vector<uint32_t> order(2 * kCapacityChunks);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 random(2024);
  std::vector<double> rates;
  for (int epoch = 0; epoch < 5; ++epoch) {
    std::shuffle(order.begin(), order.end(), random);
    uint64_t hits = 0;
    for (uint32_t chunk : order) {
      const ChunkKey key = Key(1, chunk);
      auto read = (*store)->Read(key);
      if (read.ok()) {
        EXPECT_TRUE(*read == ChunkBytes(key, kChunkBytes));
        ++hits;
      } else {
        EXPECT_TRUE(
            (*store)->Insert(key, testing::kAnyChunkSize, ChunkBytes(key, kChunkBytes)).ok());
      }
    }
    rates.push_back(static_cast<double>(hits) / order.size());
  }
  return rates;
}

TEST(NoThrash, ActiveDatasetTwiceTheCapacityKeepsHalfItsHits) {
  const std::vector<double> rates = EpochHitRates(EvictionMode::kDatasetAware);
  ASSERT_EQ(rates.size(), 5u);
  for (int epoch = 1; epoch < 5; ++epoch) {
    EXPECT_GE(rates[epoch], 0.45) << "epoch " << epoch + 1;
    RecordProperty("hit_rate_epoch_" + std::to_string(epoch + 1), std::to_string(rates[epoch]));
  }
}

// LRU keeps only what the previous epoch read last, so a fresh random order
// hits it about 15% of the time (0% for a sequential order).
TEST(NoThrash, PlainLruThrashesOnTheSameWorkload) {
  const std::vector<double> rates = EpochHitRates(EvictionMode::kLru);
  ASSERT_EQ(rates.size(), 5u);
  for (int epoch = 1; epoch < 5; ++epoch) {
    EXPECT_LT(rates[epoch], 0.25) << "epoch " << epoch + 1;
    RecordProperty("hit_rate_epoch_" + std::to_string(epoch + 1), std::to_string(rates[epoch]));
  }
}

}  // namespace
}  // namespace granary::store
