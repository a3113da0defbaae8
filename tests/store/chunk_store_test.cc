#include "cache_server/store/chunk_store.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <tuple>

#include "cache_server/store/aligned_buffer.h"
#include "tests/store/store_test_util.h"

namespace granary::store {
namespace {

using testing::ChunkBytes;
using testing::ScratchDir;
using testing::SmallStoreOptions;

ChunkKey Key(uint64_t version, uint32_t chunk) {
  return {.dataset_version = version, .file_id = 3, .chunk_index = chunk};
}

// (use_io_uring, direct_io)
class RoundTrip : public ::testing::TestWithParam<std::tuple<bool, bool>> {
 protected:
  // 16-29 bytes: a string grown by less than twice its inline capacity.
  static constexpr uint64_t kSizes[] = {
      1, 16, 24, 29, 4096, (4 << 20) - 1, 4 << 20, (4 << 20) + 1, 64 << 20};

  // Built once for every engine: large fresh buffers are slow to fault in.
  static const std::string& Expected(uint32_t i) {
    static const auto* chunks = [] {
      auto* built = new std::vector<std::string>;
      for (uint32_t i = 0; i < std::size(kSizes); ++i) {
        built->push_back(ChunkBytes(Key(7, i), kSizes[i]));
      }
      return built;
    }();
    return (*chunks)[i];
  }
};

TEST_P(RoundTrip, ManySizesReadBackExactly) {
  const auto [use_io_uring, direct_io] = GetParam();
  ScratchDir dir;
  StoreOptions options = SmallStoreOptions(dir, 256ull << 20, 64ull << 20);
  options.use_io_uring = use_io_uring;
  options.direct_io = direct_io;
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->Stats().io_engine, use_io_uring ? "io_uring" : "pread");
  for (uint32_t i = 0; i < std::size(kSizes); ++i) {
    auto stored = (*store)->Insert(Key(7, i), testing::kAnyChunkSize, Expected(i));
    ASSERT_TRUE(stored.ok()) << stored.status();
    EXPECT_TRUE(*stored);
  }
  for (uint32_t i = 0; i < std::size(kSizes); ++i) {
    auto read = (*store)->Read(Key(7, i));
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->size(), kSizes[i]);
    EXPECT_TRUE(*read == Expected(i)) << "size " << kSizes[i];
  }
  const StoreStats stats = (*store)->Stats();
  EXPECT_EQ(stats.hits, std::size(kSizes));
  EXPECT_EQ(stats.chunk_count, std::size(kSizes));
  EXPECT_EQ(stats.checksum_failures, 0u);
}

INSTANTIATE_TEST_SUITE_P(IoEngines, RoundTrip,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "IoUring" : "Pread") +
                                  (std::get<1>(info.param) ? "Direct" : "Buffered");
                         });

TEST(ChunkStore, MissIsNotFoundAndInsertIsIdempotent) {
  ScratchDir dir;
  auto store = ChunkStore::Open(SmallStoreOptions(dir, 1 << 20, 64 << 10));
  ASSERT_TRUE(store.ok()) << store.status();
  auto missing = (*store)->Read(Key(1, 0));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE((*store)->Contains(Key(1, 0)));
  EXPECT_TRUE(*(*store)->Insert(Key(1, 0), testing::kAnyChunkSize, "first"));
  EXPECT_TRUE(*(*store)->Insert(Key(1, 0), testing::kAnyChunkSize, "second"));
  EXPECT_TRUE((*store)->Contains(Key(1, 0)));
  EXPECT_EQ(*(*store)->Read(Key(1, 0)), "first");
  EXPECT_EQ((*store)->Stats().misses, 1u);
  EXPECT_EQ((*store)->Stats().inserts, 1u);
}

TEST(ChunkStore, EmptyChunkRoundTrips) {
  ScratchDir dir;
  auto store = ChunkStore::Open(SmallStoreOptions(dir, 1 << 20, 64 << 10));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE(*(*store)->Insert(Key(1, 0), testing::kAnyChunkSize, ""));
  auto read = (*store)->Read(Key(1, 0));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "");
}

TEST(ChunkStore, ReopenKeepsChunksAndVersionStates) {
  ScratchDir dir;
  const StoreOptions options = SmallStoreOptions(dir, 4 << 20, 64 << 10);
  {
    auto store = ChunkStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    for (uint32_t i = 0; i < 20; ++i) {
      ASSERT_TRUE(
          *(*store)->Insert(Key(1, i), testing::kAnyChunkSize, ChunkBytes(Key(1, i), 1000 + i)));
    }
    (*store)->SetVersionState(1, VersionState::kPinned);
  }
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->Stats().chunk_count, 20u);
  EXPECT_EQ((*store)->ChunksOf(1).size(), 20u);
  for (uint32_t i = 0; i < 20; ++i) {
    auto read = (*store)->Read(Key(1, i));
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_TRUE(*read == ChunkBytes(Key(1, i), 1000 + i));
  }
  // Version 1 is still pinned: a flood of version 2 cannot displace it.
  for (uint32_t i = 0; i < 200; ++i) {
    ASSERT_TRUE(
        (*store)->Insert(Key(2, i), testing::kAnyChunkSize, ChunkBytes(Key(2, i), 60 << 10)).ok());
  }
  EXPECT_EQ((*store)->ChunksOf(1).size(), 20u);
}

TEST(ChunkStore, RemoveVersionFreesItsBytesOnly) {
  ScratchDir dir;
  const StoreOptions options = SmallStoreOptions(dir, 8 << 20, 64 << 10);
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  for (uint32_t i = 0; i < 30; ++i) {
    ASSERT_TRUE(*(*store)->Insert(Key(1, i), testing::kAnyChunkSize, ChunkBytes(Key(1, i), 10000)));
    ASSERT_TRUE(*(*store)->Insert(Key(2, i), testing::kAnyChunkSize, ChunkBytes(Key(2, i), 20000)));
  }
  EXPECT_EQ((*store)->CachedBytes(1), 30u * 10000);
  EXPECT_EQ((*store)->CachedBytes(2), 30u * 20000);
  auto freed = (*store)->RemoveVersion(1);
  ASSERT_TRUE(freed.ok()) << freed.status();
  EXPECT_EQ(*freed, 30u * 10000);
  EXPECT_EQ((*store)->CachedBytes(1), 0u);
  EXPECT_TRUE((*store)->ChunksOf(1).empty());
  EXPECT_FALSE((*store)->Contains(Key(1, 0)));
  EXPECT_TRUE((*store)->Contains(Key(2, 0)));
  EXPECT_EQ((*store)->Stats().disk_bytes, testing::DataFileBytes(options));
  EXPECT_EQ(testing::DataFileBytes(options), 30u * RoundUpToBlock(20000));
}

TEST(ChunkStore, SpreadsDataFilesOverDirectories) {
  ScratchDir dir;
  StoreOptions options = SmallStoreOptions(dir, 16 << 20, 64 << 10);
  options.directories = {dir.Sub("nvme0"), dir.Sub("nvme1")};
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  for (uint32_t i = 0; i < 64; ++i) {
    ASSERT_TRUE(*(*store)->Insert(Key(i % 4, i), testing::kAnyChunkSize,
                                  ChunkBytes(Key(i % 4, i), 64 << 10)));
  }
  for (const std::string& directory : options.directories) {
    StoreOptions one_directory = options;
    one_directory.directories = {directory};
    EXPECT_GE(testing::DataFiles(one_directory).size(), 2u) << directory;
  }
  for (uint32_t i = 0; i < 64; ++i) EXPECT_TRUE((*store)->Read(Key(i % 4, i)).ok());
}

}  // namespace
}  // namespace granary::store
