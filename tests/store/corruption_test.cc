// Bytes flipped in data files on disk make reads miss, never return wrong
// data, and drop the entry.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "cache_server/store/chunk_store.h"
#include "tests/store/store_test_util.h"

namespace granary::store {
namespace {

using testing::ChunkBytes;
using testing::ScratchDir;
using testing::SmallStoreOptions;

constexpr uint32_t kChunks = 24;
// A whole number of blocks, so that O_DIRECT can write the chunks in place.
constexpr uint64_t kChunkBytes = 48 << 10;

ChunkKey Key(uint32_t chunk) { return {.dataset_version = 9, .file_id = 1, .chunk_index = chunk}; }

// Inverts one byte at each of `count` random offsets of every data file.
void FlipBytes(const StoreOptions& options, int count, std::mt19937_64& random) {
  for (const auto& path : testing::DataFiles(options)) {
    const int fd = ::open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0) << path;
    const uint64_t size = std::filesystem::file_size(path);
    for (int i = 0; i < count; ++i) {
      const off_t at = static_cast<off_t>(random() % size);
      char byte;
      ASSERT_EQ(::pread(fd, &byte, 1, at), 1);
      byte = static_cast<char>(~byte);
      ASSERT_EQ(::pwrite(fd, &byte, 1, at), 1);
    }
    ::close(fd);
  }
}

// Stores every chunk, as the chunks of one file with no holes between them;
// each must be admitted.
void InsertAll(ChunkStore& store) {
  for (uint32_t i = 0; i < kChunks; ++i) {
    ASSERT_TRUE(*store.Insert(Key(i), kChunkBytes, ChunkBytes(Key(i), kChunkBytes)));
  }
}

// Reads every chunk: each read is the right bytes or a NOT_FOUND miss.
// Returns the number of misses.
uint64_t ReadAllExpectingNoWrongBytes(ChunkStore& store) {
  uint64_t misses = 0;
  for (uint32_t i = 0; i < kChunks; ++i) {
    auto read = store.Read(Key(i));
    if (read.ok()) {
      EXPECT_TRUE(*read == ChunkBytes(Key(i), kChunkBytes)) << "wrong bytes for chunk " << i;
    } else {
      EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound) << read.status();
      EXPECT_FALSE(store.Contains(Key(i))) << "a corrupt chunk must be dropped";
      ++misses;
    }
  }
  return misses;
}

// (direct_io, reopen): corrupt while the store is open or while it is closed.
class Corruption : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(Corruption, FlippedBytesAreMissesNeverWrongData) {
  const auto [direct_io, reopen] = GetParam();
  ScratchDir dir;
  StoreOptions options = SmallStoreOptions(dir, 8 << 20, 64 << 10);
  options.direct_io = direct_io;
  std::mt19937_64 random(42);
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_NO_FATAL_FAILURE(InsertAll(**store));
  if (reopen) store->reset();
  FlipBytes(options, 3, random);
  if (reopen) {
    store = ChunkStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
  }
  const uint64_t misses = ReadAllExpectingNoWrongBytes(**store);
  EXPECT_GT(misses, 0u);
  EXPECT_EQ((*store)->Stats().checksum_failures, misses);
  // A second pass finds the same chunks gone, now as plain misses.
  EXPECT_EQ(ReadAllExpectingNoWrongBytes(**store), misses);
  EXPECT_EQ((*store)->Stats().checksum_failures, misses);
  // A dropped chunk can be stored again.
  for (uint32_t i = 0; i < kChunks; ++i) {
    ASSERT_TRUE((*store)->Insert(Key(i), kChunkBytes, ChunkBytes(Key(i), kChunkBytes)).ok());
  }
  EXPECT_EQ(ReadAllExpectingNoWrongBytes(**store), 0u);
  // Stored again where they were, they take the disk they took before.
  EXPECT_EQ((*store)->Stats().disk_bytes, testing::DataFileBytes(options));
  EXPECT_EQ((*store)->Stats().disk_bytes, kChunks * kChunkBytes);
}

INSTANTIATE_TEST_SUITE_P(Modes, Corruption,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "Direct" : "Buffered") +
                                  (std::get<1>(info.param) ? "WhileClosed" : "WhileOpen");
                         });

TEST(Corruption, TruncatedDataFileIsAMiss) {
  ScratchDir dir;
  const StoreOptions options = SmallStoreOptions(dir, 8 << 20, 64 << 10);
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_NO_FATAL_FAILURE(InsertAll(**store));
  for (const auto& path : testing::DataFiles(options)) std::filesystem::resize_file(path, 4096);
  EXPECT_EQ(ReadAllExpectingNoWrongBytes(**store), kChunks);
}

TEST(Corruption, DeletedDataFileIsAMissAfterReopen) {
  ScratchDir dir;
  const StoreOptions options = SmallStoreOptions(dir, 8 << 20, 64 << 10);
  const ChunkKey other_file{.dataset_version = 9, .file_id = 2, .chunk_index = 0};
  std::filesystem::path deleted;
  {
    auto store = ChunkStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_NO_FATAL_FAILURE(InsertAll(**store));
    const auto files = testing::DataFiles(options);
    ASSERT_EQ(files.size(), 1u);
    deleted = files[0];
    ASSERT_TRUE(*(*store)->Insert(other_file, kChunkBytes, ChunkBytes(other_file, 1000)));
  }
  std::filesystem::remove(deleted);
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(ReadAllExpectingNoWrongBytes(**store), kChunks);
  auto other = (*store)->Read(other_file);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(*other, ChunkBytes(other_file, 1000));
}

}  // namespace
}  // namespace granary::store
