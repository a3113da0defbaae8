// The store keeps a bounded number of data files open, however many it
// holds (one per cached source file): files beyond the budget are reopened
// when read, and every byte still comes back verified.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "cache_server/store/chunk_store.h"
#include "cache_server/store/data_file.h"
#include "cache_server/store/descriptor_cache.h"
#include "tests/store/store_test_util.h"

namespace granary::store {
namespace {

using testing::ChunkBytes;
using testing::kAnyChunkSize;
using testing::ScratchDir;
using testing::SmallStoreOptions;

constexpr uint64_t kVersion = 7;
constexpr uint64_t kFiles = 300;
constexpr uint64_t kFileBytes = 5000;
constexpr size_t kBudget = 8;
// Descriptors the index may open meanwhile (WAL, SST and manifest files).
constexpr size_t kIndexSlack = 16;

size_t OpenDescriptors() {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                                           std::filesystem::directory_iterator()));
}

ChunkKey Key(uint64_t file) {
  return {.dataset_version = kVersion, .file_id = file, .chunk_index = 0};
}

StoreOptions BudgetedOptions(const ScratchDir& dir) {
  StoreOptions options = SmallStoreOptions(dir, 64 << 20, kAnyChunkSize);
  options.max_open_data_files = kBudget;
  return options;
}

TEST(DataFileDescriptors, StayWithinTheBudgetWhileEveryFileIsWrittenReadAndHandedOut) {
  ScratchDir dir;
  const StoreOptions options = BudgetedOptions(dir);
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  const size_t before = OpenDescriptors();
  for (uint64_t file = 0; file < kFiles; ++file) {
    ASSERT_TRUE(*(*store)->Insert(Key(file), kAnyChunkSize, ChunkBytes(Key(file), kFileBytes)));
  }
  EXPECT_LE(OpenDescriptors(), before + kBudget + kIndexSlack);
  for (uint64_t file = 0; file < kFiles; ++file) {
    absl::StatusOr<std::string> read = (*store)->Read(Key(file));
    ASSERT_TRUE(read.ok()) << file << ": " << read.status();
    EXPECT_TRUE(*read == ChunkBytes(Key(file), kFileBytes)) << file;
    auto whole =
        (*store)->OpenWholeFile(kVersion, file, kFileBytes, kAnyChunkSize, WholeFileUse::kReadNow);
    ASSERT_TRUE(whole.ok()) << file << ": " << whole.status();
  }
  EXPECT_LE(OpenDescriptors(), before + kBudget + kIndexSlack);
  EXPECT_EQ((*store)->Stats().chunk_count, kFiles);
}

TEST(DataFileDescriptors, StayWithinTheBudgetWhenTheStoreReopensAndVerifiesItsFiles) {
  ScratchDir dir;
  const StoreOptions options = BudgetedOptions(dir);
  {
    auto store = ChunkStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    for (uint64_t file = 0; file < kFiles; ++file) {
      ASSERT_TRUE(*(*store)->Insert(Key(file), kAnyChunkSize, ChunkBytes(Key(file), kFileBytes)));
    }
  }
  const size_t before = OpenDescriptors();
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_LE(OpenDescriptors(), before + kBudget + kIndexSlack);
  EXPECT_EQ((*store)->Stats().chunk_count, kFiles);
  for (uint64_t file = 0; file < kFiles; ++file) {
    absl::StatusOr<std::string> read = (*store)->Read(Key(file));
    ASSERT_TRUE(read.ok()) << file << ": " << read.status();
    EXPECT_TRUE(*read == ChunkBytes(Key(file), kFileBytes)) << file;
  }
}

TEST(DataFileDescriptors, AFileDeletedAfterItsDescriptorWasClosedIsAMissNotAnError) {
  ScratchDir dir;
  StoreOptions options = BudgetedOptions(dir);
  options.max_open_data_files = 1;
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  // The second file's descriptor takes the first one's place in the cache.
  ASSERT_TRUE(*(*store)->Insert(Key(0), kAnyChunkSize, ChunkBytes(Key(0), kFileBytes)));
  ASSERT_TRUE(*(*store)->Insert(Key(1), kAnyChunkSize, ChunkBytes(Key(1), kFileBytes)));
  // Data files are numbered from 1 in the order they are made.
  ASSERT_TRUE(std::filesystem::remove(options.directories[0] + "/" + DataFile::RelativePath(1)));
  absl::StatusOr<std::string> gone = (*store)->Read(Key(0));
  EXPECT_TRUE(absl::IsNotFound(gone.status())) << gone.status();
  EXPECT_EQ((*store)->Stats().chunk_count, 1u);
  absl::StatusOr<std::string> kept = (*store)->Read(Key(1));
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_TRUE(*kept == ChunkBytes(Key(1), kFileBytes));
}

TEST(DescriptorCache, ClosesTheLeastRecentlyUsedButNeverOneInUse) {
  ScratchDir dir;
  auto path = [&](int i) { return dir.Sub(absl::StrCat("f", i)); };
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(std::ofstream(path(i)).good());
  DescriptorCache cache(2);
  absl::StatusOr<SharedFd> held = cache.Get(0, path(0), O_RDONLY);
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_TRUE(cache.Get(1, path(1), O_RDONLY).ok());
  ASSERT_TRUE(cache.Get(0, path(0), O_RDONLY).ok());  // 0 is now the most recent.
  ASSERT_TRUE(cache.Get(2, path(2), O_RDONLY).ok());  // 1 goes.
  EXPECT_EQ(cache.open_count(), 2u);
  absl::StatusOr<SharedFd> again = cache.Get(0, path(0), O_RDONLY);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), held->get()) << "a cached descriptor is not reopened";
  cache.Forget(0);
  EXPECT_EQ(cache.open_count(), 1u);
  EXPECT_GE(::fcntl((*held)->get(), F_GETFD), 0) << "a held descriptor stays open";
}

TEST(DescriptorCache, AFileThatCannotBeOpenedIsNotFoundAndNamed) {
  ScratchDir dir;
  DescriptorCache cache(4);
  absl::StatusOr<SharedFd> missing = cache.Get(9, dir.Sub("missing.dat"), O_RDONLY);
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_NE(missing.status().message().find("missing.dat"), std::string::npos);
  EXPECT_EQ(cache.open_count(), 0u);
}

}  // namespace
}  // namespace granary::store
