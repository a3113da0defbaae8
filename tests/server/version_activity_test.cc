// VersionActivity over a real chunk store: a pinned version stays pinned
// whatever touches, holds and demotions come; a held version is never
// evicted, under the dataset-aware mode and under LRU alike, and may be once
// released.
#include "cache_server/catalog/version_activity.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "cache_server/store/chunk_store.h"
#include "tests/store/store_test_util.h"

namespace granary {
namespace {

using store::ChunkStore;
using store::EvictionMode;
using store::VersionState;
using store::testing::ChunkBytes;
using store::testing::kAnyChunkSize;
using store::testing::ScratchDir;
using store::testing::SmallStoreOptions;

constexpr std::chrono::milliseconds kIdleAfter{50};
constexpr uint64_t kChunkBytes = 64 << 10;
constexpr uint64_t kCapacity = 16 * kChunkBytes;

// Each chunk a file of its own, so eviction chooses chunk by chunk.
ChunkKey Key(uint64_t version, uint32_t chunk) {
  return {.dataset_version = version, .file_id = chunk, .chunk_index = 0};
}

// Polls `done` for up to 10 s.
bool Eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

TEST(VersionActivityTest, PinnedVersionStaysPinnedWhenTouchedHeldAndIdle) {
  ScratchDir dir;
  auto store = ChunkStore::Open(SmallStoreOptions(dir, kCapacity, kChunkBytes));
  ASSERT_TRUE(store.ok()) << store.status();
  (*store)->SetVersionState(1, VersionState::kPinned);
  VersionActivity activity(store->get(), kIdleAfter);
  activity.Touch(1);
  EXPECT_EQ((*store)->GetVersionState(1), VersionState::kPinned);
  activity.Hold(1);
  EXPECT_EQ((*store)->GetVersionState(1), VersionState::kPinned);
  activity.Release(1);
  EXPECT_EQ((*store)->GetVersionState(1), VersionState::kPinned);
  // Version 2, touched last, is demoted once idle: the demotions of version
  // 1's touches have run by then.
  activity.Touch(2);
  EXPECT_EQ((*store)->GetVersionState(2), VersionState::kActive);
  ASSERT_TRUE(Eventually([&] { return (*store)->GetVersionState(2) == VersionState::kInactive; }));
  EXPECT_EQ((*store)->GetVersionState(1), VersionState::kPinned);
}

class HeldVersionTest : public ::testing::TestWithParam<EvictionMode> {};

TEST_P(HeldVersionTest, IsNotEvictedUntilReleased) {
  ScratchDir dir;
  store::StoreOptions options = SmallStoreOptions(dir, kCapacity, kChunkBytes);
  options.eviction = GetParam();
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  VersionActivity activity(store->get(), kIdleAfter);
  // Version 1, held, takes half the store and is used first; version 2,
  // read all along, is three times the store.
  activity.Hold(1);
  EXPECT_EQ((*store)->GetVersionState(1), VersionState::kHeld);
  auto insert = [&](uint64_t version, uint32_t chunk) {
    const ChunkKey key = Key(version, chunk);
    auto stored = (*store)->Insert(key, kAnyChunkSize, ChunkBytes(key, kChunkBytes));
    ASSERT_TRUE(stored.ok()) << stored.status();
  };
  constexpr uint32_t kHeldChunks = kCapacity / kChunkBytes / 2;
  for (uint32_t chunk = 0; chunk < kHeldChunks; ++chunk) insert(1, chunk);
  for (uint32_t chunk = 0; chunk < 3 * kCapacity / kChunkBytes; ++chunk) {
    activity.Touch(2);
    insert(2, chunk);
  }
  for (uint32_t chunk = 0; chunk < kHeldChunks; ++chunk) {
    EXPECT_TRUE((*store)->Contains(Key(1, chunk))) << "held chunk " << chunk << " was evicted";
  }
  // The store was full: version 2 evicted itself (LRU) or was refused.
  const store::StoreStats full = (*store)->Stats();
  EXPECT_GT(full.evicted_chunks + full.admissions_refused, 0u);

  // Released and idle, version 1 makes room for version 2.
  activity.Release(1);
  ASSERT_TRUE(Eventually([&] { return (*store)->GetVersionState(1) == VersionState::kInactive; }));
  for (uint32_t chunk = 0; chunk < kCapacity / kChunkBytes; ++chunk) {
    activity.Touch(2);
    insert(2, 1000 + chunk);
  }
  uint32_t kept = 0;
  for (uint32_t chunk = 0; chunk < kHeldChunks; ++chunk) kept += (*store)->Contains(Key(1, chunk));
  EXPECT_LT(kept, kHeldChunks) << "nothing of released version 1 was evicted";
}

INSTANTIATE_TEST_SUITE_P(Modes, HeldVersionTest,
                         ::testing::Values(EvictionMode::kDatasetAware, EvictionMode::kLru),
                         [](const auto& info) {
                           return info.param == EvictionMode::kLru ? "Lru" : "DatasetAware";
                         });

}  // namespace
}  // namespace granary
