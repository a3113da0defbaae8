// Chunks held in part (InsertBlocks): ranges inside the blocks held are
// served and verified block by block, everything else is a miss; the blocks
// count as the bytes they take; a flipped byte in a held block is a miss;
// what is held survives a reopen; a whole insert completes the chunk; a file
// with a chunk held in part is never handed out whole; and the capacity
// bounds blocks as it bounds chunks. Chunks held in part are checksummed in
// blocks of their own, 4 KiB by default, so that an unaligned read keeps
// little more than its bytes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "cache_server/store/aligned_buffer.h"
#include "cache_server/store/chunk_store.h"
#include "tests/store/store_test_util.h"

namespace granary::store {
namespace {

using testing::ChunkBytes;
using testing::ScratchDir;
using testing::SmallStoreOptions;

constexpr uint64_t kBlock = 64 << 10;
constexpr uint32_t kChunkSize = 1 << 20;
// Five whole blocks and a short one.
constexpr uint32_t kChunkBytes = 5 * kBlock + 1234;

const ChunkKey kKey{.dataset_version = 5, .file_id = 2, .chunk_index = 1};

StoreOptions Options(const ScratchDir& dir, uint64_t capacity_bytes = 8 << 20) {
  StoreOptions options = SmallStoreOptions(dir, capacity_bytes, kChunkSize);
  options.checksum_block_bytes = kBlock;
  options.partial_block_bytes = kBlock;
  return options;
}

// Blocks [first, first + count) of kKey's bytes, cut at the chunk's end.
std::string Blocks(const std::string& chunk, uint64_t first, uint64_t count) {
  return chunk.substr(first * kBlock, count * kBlock);
}

TEST(PartialChunk, BlocksServeRangesInsideThemAndTheRestIsAMiss) {
  ScratchDir dir;
  auto store = ChunkStore::Open(Options(dir));
  ASSERT_TRUE(store.ok()) << store.status();
  const std::string chunk = ChunkBytes(kKey, kChunkBytes);
  auto stored = (*store)->InsertBlocks(kKey, kChunkSize, kChunkBytes, kBlock, Blocks(chunk, 1, 2));
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_TRUE(*stored);

  auto inside = (*store)->ReadRange(kKey, kBlock + 100, 2 * kBlock - 200);
  ASSERT_TRUE(inside.ok()) << inside.status();
  EXPECT_TRUE(*inside == chunk.substr(kBlock + 100, 2 * kBlock - 200));
  EXPECT_TRUE(absl::IsNotFound((*store)->ReadRange(kKey, kBlock - 1, 2).status()));
  EXPECT_TRUE(absl::IsNotFound((*store)->ReadRange(kKey, 3 * kBlock, 1).status()));
  EXPECT_TRUE(absl::IsNotFound((*store)->Read(kKey).status()));
  EXPECT_TRUE(absl::IsNotFound((*store)->Locate(kKey).status()));
  EXPECT_FALSE((*store)->Contains(kKey));
  StoreStats stats = (*store)->Stats();
  EXPECT_EQ(stats.chunk_count, 1u);
  EXPECT_EQ(stats.partial_chunks, 1u);
  EXPECT_EQ(stats.used_bytes, 2 * kBlock);
  EXPECT_EQ(stats.disk_bytes, 2 * kBlock);
  EXPECT_EQ((*store)->CachedBytes(kKey.dataset_version), 2 * kBlock);
  EXPECT_EQ(testing::DataFileBytes(Options(dir)), 2 * kBlock);

  // Blocks held already take nothing more; the short last block takes a
  // whole disk block.
  ASSERT_TRUE(
      (*store)->InsertBlocks(kKey, kChunkSize, kChunkBytes, kBlock, Blocks(chunk, 1, 1)).ok());
  ASSERT_TRUE(
      (*store)->InsertBlocks(kKey, kChunkSize, kChunkBytes, 5 * kBlock, Blocks(chunk, 5, 1)).ok());
  stats = (*store)->Stats();
  EXPECT_EQ(stats.used_bytes, 2 * kBlock + 1234);
  EXPECT_EQ(stats.disk_bytes, 2 * kBlock + kBlockBytes);
  EXPECT_EQ(stats.disk_bytes, testing::DataFileBytes(Options(dir)));
  auto tail = (*store)->ReadRange(kKey, kChunkBytes - 10, 10);
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_TRUE(*tail == chunk.substr(kChunkBytes - 10));

  // The whole chunk completes it in place.
  ASSERT_TRUE((*store)->Insert(kKey, kChunkSize, chunk).ok());
  EXPECT_TRUE((*store)->Contains(kKey));
  auto whole = (*store)->Read(kKey);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_TRUE(*whole == chunk);
  stats = (*store)->Stats();
  EXPECT_EQ(stats.chunk_count, 1u);
  EXPECT_EQ(stats.partial_chunks, 0u);
  EXPECT_EQ(stats.used_bytes, kChunkBytes);
  EXPECT_EQ(stats.disk_bytes, RoundUpToBlock(kChunkBytes));
  EXPECT_EQ(stats.disk_bytes, testing::DataFileBytes(Options(dir)));
  // Blocks of a chunk held whole change nothing.
  ASSERT_TRUE((*store)->InsertBlocks(kKey, kChunkSize, kChunkBytes, 0, Blocks(chunk, 0, 1)).ok());
  EXPECT_TRUE((*store)->Contains(kKey));
  EXPECT_EQ((*store)->Stats().used_bytes, kChunkBytes);
}

TEST(PartialChunk, BlocksThatAreNotWholeBlocksOfTheChunkAreRefused) {
  ScratchDir dir;
  auto store = ChunkStore::Open(Options(dir));
  ASSERT_TRUE(store.ok()) << store.status();
  const std::string chunk = ChunkBytes(kKey, kChunkBytes);
  struct Bad {
    uint64_t offset;
    uint64_t length;
    uint32_t chunk_length;
    const char* why;
  };
  for (const Bad& bad :
       {Bad{100, kBlock, kChunkBytes, "starts inside a block"},
        Bad{0, kBlock - 1, kChunkBytes, "ends inside a block"},
        Bad{5 * kBlock, 1235, kChunkBytes, "ends past the chunk"}, Bad{0, 0, kChunkBytes, "empty"},
        Bad{0, kBlock, kChunkSize + 1, "chunk over its chunk size"}}) {
    auto stored = (*store)->InsertBlocks(kKey, kChunkSize, bad.chunk_length, bad.offset,
                                         std::string(bad.length, 'x'));
    EXPECT_TRUE(absl::IsInvalidArgument(stored.status())) << bad.why << ": " << stored.status();
    EXPECT_NE(stored.status().message().find(kKey.ToString()), std::string::npos) << bad.why;
  }
  EXPECT_EQ((*store)->Stats().chunk_count, 0u);
  EXPECT_EQ((*store)->Stats().disk_bytes, 0u);
}

TEST(PartialChunk, AFlippedByteInAHeldBlockIsAMissNeverWrongData) {
  ScratchDir dir;
  const StoreOptions options = Options(dir);
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  const std::string chunk = ChunkBytes(kKey, kChunkBytes);
  ASSERT_TRUE((*store)->InsertBlocks(kKey, kChunkSize, kChunkBytes, 0, Blocks(chunk, 0, 2)).ok());
  const auto files = testing::DataFiles(options);
  ASSERT_EQ(files.size(), 1u);
  {
    const int fd = ::open(files[0].c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    // The chunk lies at chunk_index × chunk size; flip a byte of its block 1.
    const off_t at = static_cast<off_t>(kChunkSize + kBlock + 77);
    char byte = 0;
    ASSERT_EQ(::pread(fd, &byte, 1, at), 1);
    byte = static_cast<char>(byte ^ 0x20);
    ASSERT_EQ(::pwrite(fd, &byte, 1, at), 1);
    ::close(fd);
  }
  auto first = (*store)->ReadRange(kKey, 0, 100);  // Block 0 is untouched.
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(*first == chunk.substr(0, 100));
  EXPECT_TRUE(absl::IsNotFound((*store)->ReadRange(kKey, kBlock + 50, 100).status()));
  EXPECT_EQ((*store)->Stats().checksum_failures, 1u);
  // The entry went with it; its blocks can be stored again.
  EXPECT_EQ((*store)->Stats().chunk_count, 0u);
  EXPECT_EQ((*store)->Stats().used_bytes, 0u);
  ASSERT_TRUE((*store)->InsertBlocks(kKey, kChunkSize, kChunkBytes, 0, Blocks(chunk, 0, 2)).ok());
  auto again = (*store)->ReadRange(kKey, kBlock + 50, 100);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(*again == chunk.substr(kBlock + 50, 100));
}

TEST(PartialChunk, WhatIsHeldSurvivesAReopenAndAFlipWhileClosedIsCaught) {
  ScratchDir dir;
  const StoreOptions options = Options(dir);
  const std::string chunk = ChunkBytes(kKey, kChunkBytes);
  const ChunkKey other{.dataset_version = 5, .file_id = 3, .chunk_index = 0};
  const std::string other_chunk = ChunkBytes(other, kChunkBytes);
  {
    auto store = ChunkStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE(
        (*store)->InsertBlocks(kKey, kChunkSize, kChunkBytes, kBlock, Blocks(chunk, 1, 1)).ok());
    ASSERT_TRUE((*store)
                    ->InsertBlocks(kKey, kChunkSize, kChunkBytes, 3 * kBlock, Blocks(chunk, 3, 3))
                    .ok());
    ASSERT_TRUE(
        (*store)->InsertBlocks(other, kChunkSize, kChunkBytes, 0, Blocks(other_chunk, 0, 1)).ok());
  }
  {  // Flip a byte of `other`'s only block while the store is closed.
    auto files = testing::DataFiles(options);
    ASSERT_EQ(files.size(), 2u);
    for (const auto& file : files) {
      // `other`'s data file ends with its block; kKey's goes past 1 MiB.
      if (std::filesystem::file_size(file) > kBlock) continue;
      const int fd = ::open(file.c_str(), O_RDWR);
      ASSERT_GE(fd, 0);
      char byte = 0;
      ASSERT_EQ(::pread(fd, &byte, 1, 10), 1);
      byte = static_cast<char>(byte ^ 1);
      ASSERT_EQ(::pwrite(fd, &byte, 1, 10), 1);
      ::close(fd);
    }
  }
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  for (uint64_t block : {1, 3, 4, 5}) {
    const uint64_t length = std::min<uint64_t>(kBlock, kChunkBytes - block * kBlock);
    auto read = (*store)->ReadRange(kKey, block * kBlock, length);
    ASSERT_TRUE(read.ok()) << "block " << block << ": " << read.status();
    EXPECT_TRUE(*read == chunk.substr(block * kBlock, length)) << "block " << block;
  }
  EXPECT_TRUE(absl::IsNotFound((*store)->ReadRange(kKey, 2 * kBlock, 1).status()));
  EXPECT_TRUE(absl::IsNotFound((*store)->ReadRange(other, 0, 100).status()));
  const StoreStats stats = (*store)->Stats();
  EXPECT_EQ(stats.chunk_count, 1u);
  EXPECT_EQ(stats.partial_chunks, 1u);
  EXPECT_EQ(stats.used_bytes, 3 * kBlock + 1234);
  EXPECT_EQ(stats.disk_bytes, testing::DataFileBytes(options));
}

TEST(PartialChunk, AFileWithAChunkHeldInPartIsNotHandedOutWhole) {
  ScratchDir dir;
  auto store = ChunkStore::Open(Options(dir));
  ASSERT_TRUE(store.ok()) << store.status();
  // One file of two chunks: a whole one and one held in part.
  const ChunkKey first{.dataset_version = 7, .file_id = 1, .chunk_index = 0};
  const ChunkKey second{.dataset_version = 7, .file_id = 1, .chunk_index = 1};
  const uint64_t file_size = kChunkSize + kChunkBytes;
  const std::string second_bytes = ChunkBytes(second, kChunkBytes);
  ASSERT_TRUE((*store)->Insert(first, kChunkSize, ChunkBytes(first, kChunkSize)).ok());
  ASSERT_TRUE(
      (*store)->InsertBlocks(second, kChunkSize, kChunkBytes, 0, Blocks(second_bytes, 0, 5)).ok());
  EXPECT_TRUE(absl::IsNotFound(
      (*store)->OpenWholeFile(7, 1, file_size, kChunkSize, WholeFileUse::kReadNow).status()));
  ASSERT_TRUE((*store)->Insert(second, kChunkSize, second_bytes).ok());
  auto whole = (*store)->OpenWholeFile(7, 1, file_size, kChunkSize, WholeFileUse::kReadNow);
  ASSERT_TRUE(whole.ok()) << whole.status();
}

TEST(PartialChunk, BlocksAreEvictedWithTheirFilesAndTheCapacityHolds) {
  ScratchDir dir;
  const StoreOptions options = Options(dir, 2 << 20);
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  // 64 files of an inactive version, three blocks of each: 12 MiB asked of
  // a 2 MiB cache.
  for (uint64_t file = 0; file < 64; ++file) {
    const ChunkKey key{.dataset_version = 9, .file_id = file, .chunk_index = 0};
    const std::string chunk = ChunkBytes(key, kChunkBytes);
    auto stored = (*store)->InsertBlocks(key, kChunkSize, kChunkBytes, kBlock, Blocks(chunk, 1, 3));
    ASSERT_TRUE(stored.ok()) << stored.status();
    EXPECT_TRUE(*stored);
    const StoreStats stats = (*store)->Stats();
    ASSERT_LE(stats.disk_bytes, options.capacity_bytes);
    ASSERT_EQ(stats.disk_bytes, testing::DataFileBytes(options));
  }
  const StoreStats stats = (*store)->Stats();
  EXPECT_GT(stats.evicted_chunks, 0u);
  EXPECT_EQ(stats.partial_chunks, stats.chunk_count);
  EXPECT_EQ(stats.used_bytes, stats.chunk_count * 3 * kBlock);
  // The last one stored is held.
  const ChunkKey last{.dataset_version = 9, .file_id = 63, .chunk_index = 0};
  auto read = (*store)->ReadRange(last, 2 * kBlock, kBlock);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(*read == ChunkBytes(last, kChunkBytes).substr(2 * kBlock, kBlock));
}

TEST(PartialChunk, AnUnalignedReadKeepsItsDiskBlocksAndTheWholeChunkReturnsToLargeBlocks) {
  ScratchDir dir;
  constexpr uint32_t kFourMiB = 4 << 20;
  StoreOptions options = SmallStoreOptions(dir, 16 << 20, kFourMiB);
  ASSERT_EQ(options.partial_block_bytes, kBlockBytes);
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_EQ((*store)->partial_block_bytes(kFourMiB), kBlockBytes);
  const std::string chunk = ChunkBytes(kKey, kFourMiB);
  // A 64 KiB read at an offset inside a disk block covers 17 of them.
  const uint64_t offset = 3 * kBlock + 1000, length = 64 << 10;
  const uint64_t begin = offset / kBlockBytes * kBlockBytes;
  const uint64_t end = (offset + length + kBlockBytes - 1) / kBlockBytes * kBlockBytes;
  ASSERT_EQ(end - begin, 17 * kBlockBytes);
  auto stored = (*store)->InsertBlocks(kKey, kFourMiB, kFourMiB, begin,
                                       std::string_view(chunk).substr(begin, end - begin));
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_TRUE(*stored);
  auto read = (*store)->ReadRange(kKey, offset, length);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(*read == chunk.substr(offset, length));
  EXPECT_TRUE(absl::IsNotFound((*store)->ReadRange(kKey, begin - 1, 2).status()));
  EXPECT_TRUE(absl::IsNotFound((*store)->ReadRange(kKey, end, 1).status()));
  EXPECT_EQ((*store)->Stats().used_bytes, 17 * kBlockBytes);
  EXPECT_EQ(testing::DataFileBytes(options), 17 * kBlockBytes);

  // Completed, the chunk is checked in the whole-chunk blocks again.
  ASSERT_TRUE((*store)->Insert(kKey, kFourMiB, chunk).ok());
  auto extent = (*store)->Locate(kKey);
  ASSERT_TRUE(extent.ok()) << extent.status();
  EXPECT_EQ(extent->location.checksum_block_bytes(), options.checksum_block_bytes);
  EXPECT_EQ(extent->location.block_xxh3_size(), kFourMiB / options.checksum_block_bytes);
  auto whole = (*store)->Read(kKey);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_TRUE(*whole == chunk);
}

TEST(PartialChunk, LargeChunksAreHeldInPartInBlocksThatKeepTheirEntriesSmall) {
  ScratchDir dir;
  auto store = ChunkStore::Open(SmallStoreOptions(dir, 128 << 20, 64 << 20));
  ASSERT_TRUE(store.ok()) << store.status();
  // 1,024 blocks at most: a 64 MiB chunk in 64 KiB blocks, a 6 MiB one in
  // 8 KiB blocks (6 KiB rounded up to the disk block).
  EXPECT_EQ((*store)->partial_block_bytes(64 << 20), kBlock);
  EXPECT_EQ((*store)->partial_block_bytes(6 << 20), 2 * kBlockBytes);
  EXPECT_EQ((*store)->partial_block_bytes(1 << 20), kBlockBytes);
  const std::string chunk = ChunkBytes(kKey, 64 << 20);
  auto misaligned = (*store)->InsertBlocks(kKey, 64 << 20, 64 << 20, kBlockBytes,
                                           std::string_view(chunk).substr(kBlockBytes, kBlock));
  EXPECT_TRUE(absl::IsInvalidArgument(misaligned.status())) << misaligned.status();
  auto stored = (*store)->InsertBlocks(kKey, 64 << 20, 64 << 20, kBlock,
                                       std::string_view(chunk).substr(kBlock, kBlock));
  ASSERT_TRUE(stored.ok()) << stored.status();
  auto located = (*store)->ReadRange(kKey, kBlock + 5, 100);
  ASSERT_TRUE(located.ok()) << located.status();
  EXPECT_TRUE(*located == chunk.substr(kBlock + 5, 100));
}

}  // namespace
}  // namespace granary::store
