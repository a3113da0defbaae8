// Bad options and bad chunks get clear errors naming what was wrong.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cstring>
#include <fstream>

#include "cache_server/store/chunk_store.h"
#include "common/base/absl_compat.h"
#include "tests/store/store_test_util.h"

namespace granary::store {
namespace {

using testing::ScratchDir;
using testing::SmallStoreOptions;

std::string Message(const absl::Status& status) { return std::string(status.message()); }

TEST(BadInput, CacheDirectoryUnderAFileIsNamed) {
  ScratchDir dir;
  std::ofstream(dir.Sub("plain-file")) << "x";
  StoreOptions options = SmallStoreOptions(dir, 1 << 20, 64 << 10);
  options.directories = {dir.Sub("plain-file") + "/cache"};
  auto store = ChunkStore::Open(options);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(Message(store.status()).find(options.directories[0]), std::string::npos)
      << store.status();
}

TEST(BadInput, FileWhereADirectoryIsExpectedIsNamed) {
  ScratchDir dir;
  std::ofstream(dir.Sub("plain-file")) << "x";
  StoreOptions options = SmallStoreOptions(dir, 1 << 20, 64 << 10);
  options.directories = {dir.Sub("plain-file")};
  auto store = ChunkStore::Open(options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(Message(store.status()).find("is not a directory"), std::string::npos)
      << store.status();
  EXPECT_NE(Message(store.status()).find(options.directories[0]), std::string::npos);
}

// A read-only bind mount, as a read-only or failing NVMe would appear.
TEST(BadInput, ReadOnlyCacheDirectoryIsNamed) {
  ScratchDir dir;
  const std::string cache = dir.Sub("readonly");
  std::filesystem::create_directories(cache);
  if (::mount(cache.c_str(), cache.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    GTEST_SKIP() << "cannot bind-mount (needs root): " << std::strerror(errno);
  }
  const bool remounted =
      ::mount(nullptr, cache.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) == 0;
  StoreOptions options = SmallStoreOptions(dir, 1 << 20, 64 << 10);
  options.directories = {cache};
  auto store = ChunkStore::Open(options);
  ::umount2(cache.c_str(), MNT_DETACH);
  ASSERT_TRUE(remounted) << std::strerror(errno);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kPermissionDenied) << store.status();
  EXPECT_NE(Message(store.status()).find(cache + " is not writable"), std::string::npos)
      << store.status();
  EXPECT_NE(Message(store.status()).find("Read-only file system"), std::string::npos)
      << store.status();
}

TEST(BadInput, CapacitySmallerThanOneChunkIsRefused) {
  ScratchDir dir;
  auto store = ChunkStore::Open(SmallStoreOptions(dir, 100 << 10, 1 << 20));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(store.status()).find("capacity 100.0 KiB is smaller than one chunk"),
            std::string::npos)
      << store.status();
}

TEST(BadInput, DefaultCapacityOfZeroIsRefused) {
  ScratchDir dir;
  StoreOptions options;
  options.directories = {dir.Sub("cache")};
  options.index_path = dir.Sub("index");
  auto store = ChunkStore::Open(options);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(Message(store.status()).find("capacity"), std::string::npos) << store.status();
}

TEST(BadInput, MissingDirectoriesOrIndexAreRefused) {
  ScratchDir dir;
  StoreOptions options = SmallStoreOptions(dir, 1 << 20, 64 << 10);
  options.directories.clear();
  EXPECT_EQ(ChunkStore::Open(options).status().code(), absl::StatusCode::kInvalidArgument);
  options = SmallStoreOptions(dir, 1 << 20, 64 << 10);
  options.index_path.clear();
  EXPECT_EQ(ChunkStore::Open(options).status().code(), absl::StatusCode::kInvalidArgument);
  options = SmallStoreOptions(dir, 1 << 20, 64 << 10);
  options.directories.push_back(options.directories[0]);
  EXPECT_EQ(ChunkStore::Open(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BadInput, IndexPathThatIsAFileIsNamed) {
  ScratchDir dir;
  std::ofstream(dir.Sub("index-file")) << "x";
  StoreOptions options = SmallStoreOptions(dir, 1 << 20, 64 << 10);
  options.index_path = dir.Sub("index-file");
  auto store = ChunkStore::Open(options);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(Message(store.status()).find(options.index_path), std::string::npos) << store.status();
}

TEST(BadInput, OversizedChunkIsRefusedAndTheStoreKeepsWorking) {
  ScratchDir dir;
  auto store = ChunkStore::Open(SmallStoreOptions(dir, 1 << 20, 64 << 10));
  ASSERT_TRUE(store.ok()) << store.status();
  const ChunkKey key{.dataset_version = 0xabc, .file_id = 2, .chunk_index = 5};
  auto stored = (*store)->Insert(key, testing::kAnyChunkSize, std::string((64 << 10) + 1, 'x'));
  ASSERT_FALSE(stored.ok());
  EXPECT_EQ(stored.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(stored.status()).find(key.ToString()), std::string::npos) << stored.status();
  EXPECT_NE(Message(stored.status()).find("over the maximum chunk size of 64.0 KiB"),
            std::string::npos)
      << stored.status();
  EXPECT_FALSE((*store)->Contains(key));
  EXPECT_TRUE(*(*store)->Insert(key, testing::kAnyChunkSize, std::string(64 << 10, 'x')));
  EXPECT_EQ((*store)->Read(key)->size(), 64u << 10);
}

}  // namespace
}  // namespace granary::store
