// Ranged reads: only the checksum blocks covering a range are read, every
// byte returned is verified, a damaged block is a miss, ranges past a chunk's
// end are refused, and entries without block checksums (stored by an older
// granaryd) are verified whole.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache_server/store/aligned_buffer.h"
#include "cache_server/store/chunk_index.h"
#include "cache_server/store/chunk_store.h"
#include "tests/store/store_test_util.h"

namespace granary::store {
namespace {

using testing::ChunkBytes;
using testing::ScratchDir;
using testing::SmallStoreOptions;

constexpr uint64_t kBlock = 64 << 10;
// Five whole blocks and a partial one.
constexpr uint64_t kChunkBytes = 5 * kBlock + 1234;

const ChunkKey kKey{.dataset_version = 5, .file_id = 2, .chunk_index = 1};

struct Range {
  uint64_t offset;
  uint64_t length;
};

// What a ranged read of kKey reads from its data file: its covering blocks,
// rounded up to 4 KiB blocks under O_DIRECT.
uint64_t CoveringBytes(const Range& range, bool direct_io) {
  if (range.length == 0) return 0;
  const uint64_t begin = range.offset / kBlock * kBlock;
  const uint64_t end =
      std::min(kChunkBytes, (range.offset + range.length + kBlock - 1) / kBlock * kBlock);
  return direct_io ? RoundUpToBlock(end - begin) : end - begin;
}

StoreOptions Options(const ScratchDir& dir, bool direct_io = false, bool use_io_uring = true) {
  StoreOptions options = SmallStoreOptions(dir, 8 << 20, 1 << 20);
  options.checksum_block_bytes = kBlock;
  options.direct_io = direct_io;
  options.use_io_uring = use_io_uring;
  return options;
}

// Whether files in `directory` can be opened with O_DIRECT (tmpfs: no; the
// store then falls back to buffered I/O).
bool SupportsDirectIo(const std::string& directory) {
  const std::string probe = directory + "/direct-probe";
  const int fd = ::open(probe.c_str(), O_RDWR | O_CREAT | O_DIRECT, 0644);
  if (fd >= 0) ::close(fd);
  ::unlink(probe.c_str());
  return fd >= 0;
}

// The store's only data file.
std::filesystem::path OnlyDataFile(const StoreOptions& options) {
  const std::vector<std::filesystem::path> files = testing::DataFiles(options);
  EXPECT_EQ(files.size(), 1u);
  return files.empty() ? std::filesystem::path() : files[0];
}

// Inverts the byte at `offset` of the store's only chunk, kKey, which lies at
// its place in its file in the store's only data file.
void FlipByte(const StoreOptions& options, uint64_t offset) {
  const std::filesystem::path path = OnlyDataFile(options);
  const uint64_t at = uint64_t{kKey.chunk_index} * testing::kAnyChunkSize + offset;
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  char byte;
  ASSERT_EQ(::pread(fd, &byte, 1, static_cast<off_t>(at)), 1);
  byte = static_cast<char>(~byte);
  ASSERT_EQ(::pwrite(fd, &byte, 1, static_cast<off_t>(at)), 1);
  ::close(fd);
}

// Rewrites the index entry of kKey with `edit` while the store is closed, as
// the entry of a data file not yet synced, which the next open verifies.
template <typename Edit>
void EditEntry(const StoreOptions& options, Edit edit) {
  auto index = ChunkIndex::Open(options.index_path);
  ASSERT_TRUE(index.ok()) << index.status();
  auto location = (*index)->Get(kKey.Encode());
  ASSERT_TRUE(location.ok() && location->has_value());
  edit(**location);
  ASSERT_TRUE((*index)->Put(kKey.Encode(), **location, /*unmark_synced=*/true).ok());
}

// (use_io_uring, direct_io)
class RangedRead : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(RangedRead, EveryRangeReadsBackExactlyFromItsCoveringBlocks) {
  const auto [use_io_uring, direct_io] = GetParam();
  ScratchDir dir;
  auto store = ChunkStore::Open(Options(dir, direct_io, use_io_uring));
  ASSERT_TRUE(store.ok()) << store.status();
  const std::string expected = ChunkBytes(kKey, kChunkBytes);
  ASSERT_TRUE(*(*store)->Insert(kKey, testing::kAnyChunkSize, expected));
  const bool direct = direct_io && SupportsDirectIo(dir.path().string());

  std::vector<Range> ranges = {
      {0, 1},                              // Inside the first block.
      {10, 100},                           //
      {0, kBlock},                         // Exactly the first block.
      {kChunkBytes - 1, 1},                // Last byte, in the partial last block.
      {kChunkBytes - 1234, 1234},          // Exactly the partial last block.
      {kChunkBytes - 2000, 2000},          // Across into it.
      {kChunkBytes, 0},                    // Empty, at the end.
      {kBlock + 17, 2 * kBlock + 5},       // Three blocks, partial at both ends.
      {kBlock / 2, kChunkBytes - kBlock},  // Most of the chunk.
  };
  for (uint64_t boundary = kBlock; boundary < kChunkBytes; boundary += kBlock) {
    for (uint64_t offset : {boundary - 1, boundary, boundary + 1}) {
      for (uint64_t length : {uint64_t{1}, uint64_t{2}, kBlock - 1, kBlock, kBlock + 1}) {
        ranges.push_back({offset, std::min(length, kChunkBytes - offset)});
      }
    }
  }
  for (const Range& range : ranges) {
    SCOPED_TRACE(::testing::Message() << "[" << range.offset << ", +" << range.length << ")");
    const uint64_t read_before = (*store)->Stats().read_bytes;
    auto read = (*store)->ReadRange(kKey, range.offset, range.length);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_TRUE(*read == expected.substr(range.offset, range.length));
    EXPECT_EQ((*store)->Stats().read_bytes - read_before, CoveringBytes(range, direct));
  }
  const StoreStats stats = (*store)->Stats();
  EXPECT_EQ(stats.hits, ranges.size());
  EXPECT_EQ(stats.checksum_failures, 0u);
}

INSTANTIATE_TEST_SUITE_P(IoEngines, RangedRead,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "IoUring" : "Pread") +
                                  (std::get<1>(info.param) ? "Direct" : "Buffered");
                         });

TEST(Locate, GivesAReadOnlyDescriptorOfTheDataFileAndTheChunksChecksums) {
  for (bool direct_io : {false, true}) {
    SCOPED_TRACE(direct_io ? "O_DIRECT store" : "buffered store");
    ScratchDir dir;
    auto store = ChunkStore::Open(Options(dir, direct_io));
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_TRUE(absl::IsNotFound((*store)->Locate(kKey).status()));
    const std::string expected = ChunkBytes(kKey, kChunkBytes);
    ASSERT_TRUE(*(*store)->Insert(kKey, testing::kAnyChunkSize, expected));

    absl::StatusOr<ChunkStore::Extent> extent = (*store)->Locate(kKey);
    ASSERT_TRUE(extent.ok()) << extent.status();
    const int flags = ::fcntl(extent->fd.get(), F_GETFL);
    EXPECT_EQ(flags & O_ACCMODE, O_RDONLY);
    EXPECT_EQ(flags & O_DIRECT, 0) << "readers read it buffered, at any offset";
    EXPECT_EQ(extent->location.length(), kChunkBytes);
    EXPECT_EQ(extent->location.checksum_block_bytes(), kBlock);
    EXPECT_EQ(extent->location.block_xxh3_size(), 6);
    std::string read(kChunkBytes, '\0');
    ASSERT_EQ(::pread(extent->fd.get(), read.data(), read.size(),
                      static_cast<off_t>(extent->location.offset())),
              static_cast<ssize_t>(kChunkBytes));
    EXPECT_TRUE(read == expected);
    EXPECT_EQ((*store)->Stats().hits, 1u);
  }
}

TEST(RangedRead, RangesPastTheEndAreOutOfRangeAndNameTheChunk) {
  ScratchDir dir;
  auto store = ChunkStore::Open(Options(dir));
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE(*(*store)->Insert(kKey, testing::kAnyChunkSize, ChunkBytes(kKey, kChunkBytes)));
  const Range past[] = {{kChunkBytes - 10, 11},
                        {kChunkBytes + 1, 0},
                        {0, kChunkBytes + 1},
                        {kBlock, std::numeric_limits<uint64_t>::max()},
                        {std::numeric_limits<uint64_t>::max(), 2}};
  for (const auto& [offset, length] : past) {
    auto read = (*store)->ReadRange(kKey, offset, length);
    EXPECT_EQ(read.status().code(), absl::StatusCode::kOutOfRange) << offset << " +" << length;
    EXPECT_NE(read.status().message().find(kKey.ToString()), std::string::npos) << read.status();
    EXPECT_NE(read.status().message().find(absl::StrCat("(", kChunkBytes, " bytes)")),
              std::string::npos)
        << read.status();
  }
  // Refusing a range is neither a hit nor a miss, and keeps the chunk.
  EXPECT_TRUE((*store)->Contains(kKey));
  EXPECT_EQ((*store)->Stats().hits, 0u);
  EXPECT_EQ((*store)->Stats().misses, 0u);
  EXPECT_EQ((*store)->ReadRange(ChunkKey{.dataset_version = 6}, 0, 1).status().code(),
            absl::StatusCode::kNotFound);
}

class FlippedByte : public ::testing::TestWithParam<bool> {};

TEST_P(FlippedByte, IsFoundByARangeCoveringItsBlockOnly) {
  ScratchDir dir;
  const StoreOptions options = Options(dir, /*direct_io=*/GetParam());
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  const std::string expected = ChunkBytes(kKey, kChunkBytes);
  ASSERT_TRUE(*(*store)->Insert(kKey, testing::kAnyChunkSize, expected));
  FlipByte(options, 3 * kBlock + 100);  // In block 3.

  // Ranges that stop short of block 3 never read it.
  auto before = (*store)->ReadRange(kKey, kBlock, 2 * kBlock);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_TRUE(*before == expected.substr(kBlock, 2 * kBlock));
  auto after = (*store)->ReadRange(kKey, 4 * kBlock, kBlock);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ((*store)->Stats().checksum_failures, 0u);

  // One byte of block 3, far from the flipped one, is a miss that drops it.
  auto covering = (*store)->ReadRange(kKey, 4 * kBlock - 1, 1);
  EXPECT_EQ(covering.status().code(), absl::StatusCode::kNotFound) << covering.status();
  EXPECT_FALSE((*store)->Contains(kKey));
  StoreStats stats = (*store)->Stats();
  EXPECT_EQ(stats.checksum_failures, 1u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.chunk_count, 0u);

  // Stored again, it reads back right.
  ASSERT_TRUE(*(*store)->Insert(kKey, testing::kAnyChunkSize, expected));
  auto again = (*store)->ReadRange(kKey, 3 * kBlock, kBlock);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(*again == expected.substr(3 * kBlock, kBlock));
}

INSTANTIATE_TEST_SUITE_P(Modes, FlippedByte, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Direct" : "Buffered"; });

TEST(RangedRead, EntryWithoutBlockChecksumsIsVerifiedWhole) {
  ScratchDir dir;
  const StoreOptions options = Options(dir);
  const std::string expected = ChunkBytes(kKey, kChunkBytes);
  {
    auto store = ChunkStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE(*(*store)->Insert(kKey, testing::kAnyChunkSize, expected));
  }
  // What an older granaryd wrote: the whole-chunk XXH3 only.
  EditEntry(options, [](v1::ChunkLocation& location) {
    location.clear_checksum_block_bytes();
    location.clear_block_xxh3();
  });
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Contains(kKey));
  const uint64_t read_before = (*store)->Stats().read_bytes;
  auto read = (*store)->ReadRange(kKey, kBlock + 5, 100);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(*read == expected.substr(kBlock + 5, 100));
  EXPECT_EQ((*store)->Stats().read_bytes - read_before, kChunkBytes);

  // So a damaged byte anywhere in the chunk fails a range far from it.
  store->reset();
  FlipByte(options, 4 * kBlock);
  store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  // The data file was verified on open (its entry was edited) or is now.
  auto damaged = (*store)->ReadRange(kKey, 0, 100);
  EXPECT_EQ(damaged.status().code(), absl::StatusCode::kNotFound) << damaged.status();
  EXPECT_FALSE((*store)->Contains(kKey));
  EXPECT_EQ((*store)->Stats().checksum_failures, 1u);
}

TEST(Recovery, UnsyncedChunkWhoseBlockChecksumsDisagreeIsDropped) {
  ScratchDir dir;
  const StoreOptions options = Options(dir);
  {
    auto store = ChunkStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE(*(*store)->Insert(kKey, testing::kAnyChunkSize, ChunkBytes(kKey, kChunkBytes)));
  }
  EditEntry(options, [](v1::ChunkLocation& location) {
    location.set_block_xxh3(2, location.block_xxh3(2) + 1);
  });
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_FALSE((*store)->Contains(kKey));
  EXPECT_EQ((*store)->Stats().checksum_failures, 1u);
  EXPECT_EQ((*store)->Stats().chunk_count, 0u);
}

TEST(Recovery, ChunksReadBackByRangeAfterReopen) {
  ScratchDir dir;
  const StoreOptions options = Options(dir, /*direct_io=*/true);
  std::vector<ChunkKey> keys;
  for (uint32_t i = 0; i < 8; ++i) keys.push_back({.dataset_version = 5, .chunk_index = i});
  {
    auto store = ChunkStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    for (const ChunkKey& key : keys) {
      ASSERT_TRUE(*(*store)->Insert(key, testing::kAnyChunkSize,
                                    ChunkBytes(key, kChunkBytes - key.chunk_index)));
    }
  }
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  for (const ChunkKey& key : keys) {
    const std::string expected = ChunkBytes(key, kChunkBytes - key.chunk_index);
    auto read = (*store)->ReadRange(key, 2 * kBlock - 3, kBlock);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_TRUE(*read == expected.substr(2 * kBlock - 3, kBlock));
  }
  EXPECT_EQ((*store)->Stats().checksum_failures, 0u);
}

TEST(BadInput, ChecksumBlockSizeMustBeAMultipleOf4KiB) {
  ScratchDir dir;
  for (uint64_t bytes : {uint64_t{0}, uint64_t{1000}, uint64_t{(64 << 10) + 1}}) {
    StoreOptions options = Options(dir);
    options.checksum_block_bytes = bytes;
    auto store = ChunkStore::Open(options);
    EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(store.status().message().find(std::to_string(bytes)), std::string::npos)
        << store.status();
  }
}

TEST(BadInput, PartialBlockSizeMustBeAMultipleOf4KiB) {
  ScratchDir dir;
  for (uint64_t bytes : {uint64_t{0}, uint64_t{6000}, uint64_t{(4 << 10) + 1}}) {
    StoreOptions options = Options(dir);
    options.partial_block_bytes = bytes;
    auto store = ChunkStore::Open(options);
    EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(store.status().message().find(absl::StrCat("partial chunks' block size ", bytes)),
              std::string::npos)
        << store.status();
  }
}

}  // namespace
}  // namespace granary::store
