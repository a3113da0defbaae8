// granary-fuse's chunk cache: a chunk is fetched once and then served from
// memory, a failed fetch is not kept, and the least recently used chunks go
// once the capacity is passed.
#include "fuse_client/read_path/chunk_cache.h"

#include <gtest/gtest.h>

#include <cstring>

#include "absl/status/status.h"

namespace granary::fuse {
namespace {

ChunkKey KeyOf(uint32_t chunk_index) { return ChunkKey{1, 2, chunk_index}; }

// A fetch of `size` bytes of `fill` that counts its calls in `*fetches`.
ChunkCache::Fetch Filled(size_t size, char fill, int* fetches) {
  return [=]() -> absl::StatusOr<ChunkBytes> {
    ++*fetches;
    ChunkBytes chunk(size);
    std::memset(chunk.bytes.get(), fill, size);
    return chunk;
  };
}

TEST(ChunkCacheTest, AFetchedChunkIsServedWithoutFetchingAgain) {
  ChunkCache cache(1 << 20);
  int fetches = 0;
  absl::StatusOr<std::shared_ptr<const ChunkBytes>> first =
      cache.GetOrFetch(KeyOf(0), Filled(100, 'a', &fetches));
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::shared_ptr<const ChunkBytes>> again =
      cache.GetOrFetch(KeyOf(0), Filled(100, 'b', &fetches));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(fetches, 1);
  EXPECT_EQ(*again, *first);
  EXPECT_EQ((*again)->span()[99], 'a');
  EXPECT_EQ(cache.GetIfCached(KeyOf(0)), *first);
  EXPECT_TRUE(cache.Contains(KeyOf(0)));
}

TEST(ChunkCacheTest, AChunkBeingFetchedIsContainedButNotYetCached) {
  ChunkCache cache(1 << 20);
  int fetches = 0;
  ChunkCache::Fetch fill = Filled(100, 'a', &fetches);
  ASSERT_TRUE(cache
                  .GetOrFetch(KeyOf(0),
                              [&]() -> absl::StatusOr<ChunkBytes> {
                                EXPECT_TRUE(cache.Contains(KeyOf(0)));
                                EXPECT_EQ(cache.GetIfCached(KeyOf(0)), nullptr);
                                EXPECT_FALSE(cache.Contains(KeyOf(1)));
                                return fill();
                              })
                  .ok());
}

TEST(ChunkCacheTest, AFailedFetchIsNotKept) {
  ChunkCache cache(1 << 20);
  int fetches = 0;
  absl::StatusOr<std::shared_ptr<const ChunkBytes>> failed =
      cache.GetOrFetch(KeyOf(0), [&]() -> absl::StatusOr<ChunkBytes> {
        ++fetches;
        return absl::UnavailableError("no owner answered");
      });
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(cache.Contains(KeyOf(0)));
  EXPECT_TRUE(cache.GetOrFetch(KeyOf(0), Filled(100, 'a', &fetches)).ok());
  EXPECT_EQ(fetches, 2);
}

TEST(ChunkCacheTest, TheLeastRecentlyUsedChunksGoPastTheCapacity) {
  ChunkCache cache(250);
  int fetches = 0;
  ASSERT_TRUE(cache.GetOrFetch(KeyOf(0), Filled(100, 'a', &fetches)).ok());
  ASSERT_TRUE(cache.GetOrFetch(KeyOf(1), Filled(100, 'b', &fetches)).ok());
  // ChunkBytes 0 is used again, so chunk 1 is the one to go.
  ASSERT_NE(cache.GetIfCached(KeyOf(0)), nullptr);
  std::shared_ptr<const ChunkBytes> held = cache.GetIfCached(KeyOf(1));
  ASSERT_TRUE(cache.GetOrFetch(KeyOf(0), Filled(100, 'a', &fetches)).ok());
  ASSERT_TRUE(cache.GetOrFetch(KeyOf(2), Filled(100, 'c', &fetches)).ok());
  EXPECT_TRUE(cache.Contains(KeyOf(0)));
  EXPECT_FALSE(cache.Contains(KeyOf(1)));
  EXPECT_TRUE(cache.Contains(KeyOf(2)));
  // A reader still holding a dropped chunk keeps its bytes.
  EXPECT_EQ(held->span()[0], 'b');
  EXPECT_EQ(fetches, 3);
}

TEST(ChunkCacheTest, AChunkLargerThanTheCapacityIsStillKept) {
  ChunkCache cache(50);
  int fetches = 0;
  ASSERT_TRUE(cache.GetOrFetch(KeyOf(0), Filled(100, 'a', &fetches)).ok());
  EXPECT_NE(cache.GetIfCached(KeyOf(0)), nullptr);
  ASSERT_TRUE(cache.GetOrFetch(KeyOf(1), Filled(100, 'b', &fetches)).ok());
  EXPECT_FALSE(cache.Contains(KeyOf(0)));
  EXPECT_NE(cache.GetIfCached(KeyOf(1)), nullptr);
}

}  // namespace
}  // namespace granary::fuse
