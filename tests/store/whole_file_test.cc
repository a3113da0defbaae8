// A source file the store holds completely is handed out whole, as one
// verified file that is the source file byte for byte; anything less is a
// miss. Chunks written past the page cache (O_DIRECT) keep data files exact.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cache_server/store/chunk_store.h"
#include "tests/store/store_test_util.h"
#include "tests/support/resident_pages.h"

namespace granary::store {
namespace {

using testing::ChunkBytes;
using testing::ScratchDir;
using testing::SmallStoreOptions;

constexpr uint64_t kVersion = 11;
constexpr uint64_t kFileId = 4;
constexpr uint32_t kChunkSize = 64 << 10;
constexpr uint64_t kFileSize = 2 * kChunkSize + 1234;

ChunkKey Key(uint32_t chunk) {
  return {.dataset_version = kVersion, .file_id = kFileId, .chunk_index = chunk};
}

uint32_t LengthOf(uint32_t chunk) {
  return static_cast<uint32_t>(std::min<uint64_t>(kChunkSize, kFileSize - chunk * kChunkSize));
}

// The source file the chunks make up.
std::string SourceFile() {
  std::string file;
  for (uint32_t chunk = 0; chunk < 3; ++chunk) file += ChunkBytes(Key(chunk), LengthOf(chunk));
  return file;
}

void Insert(ChunkStore& store, uint32_t chunk) {
  ASSERT_TRUE(*store.Insert(Key(chunk), kChunkSize, ChunkBytes(Key(chunk), LengthOf(chunk))));
}

// Every chunk of the file, in order.
void InsertWholeFile(ChunkStore& store) {
  for (uint32_t chunk = 0; chunk < 3; ++chunk) ASSERT_NO_FATAL_FAILURE(Insert(store, chunk));
}

std::string ReadAll(int fd) {
  struct stat st;
  EXPECT_EQ(::fstat(fd, &st), 0);
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  EXPECT_EQ(::pread(fd, bytes.data(), bytes.size(), 0), st.st_size);
  return bytes;
}

// Writes `byte` at `offset` of the store's one data file, behind its back.
void WriteIntoTheDataFile(const StoreOptions& options, uint64_t offset, char byte) {
  const auto files = testing::DataFiles(options);
  ASSERT_EQ(files.size(), 1u);
  const int fd = ::open(files[0].c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::pwrite(fd, &byte, 1, static_cast<off_t>(offset)), 1);
  ::close(fd);
}

// Flips the byte at `offset` of the store's one data file.
void FlipDataFileByte(const StoreOptions& options, uint64_t offset) {
  WriteIntoTheDataFile(options, offset, static_cast<char>(~SourceFile()[offset]));
}

TEST(WholeFile, IsHandedOutOnlyOnceEveryChunkIsHeld) {
  ScratchDir dir;
  auto store = ChunkStore::Open(SmallStoreOptions(dir, 8 << 20, kChunkSize));
  ASSERT_TRUE(store.ok()) << store.status();
  // Chunks arrive out of order, as readers and prewarm fetch them.
  for (uint32_t chunk : {2u, 0u}) {
    ASSERT_NO_FATAL_FAILURE(Insert(**store, chunk));
    auto partial =
        (*store)->OpenWholeFile(kVersion, kFileId, kFileSize, kChunkSize, WholeFileUse::kReadNow);
    EXPECT_TRUE(absl::IsNotFound(partial.status())) << partial.status();
  }
  ASSERT_NO_FATAL_FAILURE(Insert(**store, 1));
  auto whole =
      (*store)->OpenWholeFile(kVersion, kFileId, kFileSize, kChunkSize, WholeFileUse::kReadNow);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(::fcntl(whole->fd.get(), F_GETFL) & O_ACCMODE, O_RDONLY);
  EXPECT_TRUE(ReadAll(whole->fd.get()) == SourceFile());
  EXPECT_EQ((*store)->Stats().whole_files, 1u);
  struct stat st;
  ASSERT_EQ(::fstat(whole->fd.get(), &st), 0);
  EXPECT_EQ(whole->verified_ctime_ns, st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec);

  // Another file, another geometry, an empty file: misses naming why.
  auto other =
      (*store)->OpenWholeFile(kVersion, kFileId + 1, kFileSize, kChunkSize, WholeFileUse::kReadNow);
  EXPECT_TRUE(absl::IsNotFound(other.status())) << other.status();
  auto wrong_size =
      (*store)->OpenWholeFile(kVersion, kFileId, kFileSize + 1, kChunkSize, WholeFileUse::kReadNow);
  EXPECT_TRUE(absl::IsNotFound(wrong_size.status())) << wrong_size.status();
  auto empty = (*store)->OpenWholeFile(kVersion, kFileId, 0, kChunkSize, WholeFileUse::kReadNow);
  EXPECT_TRUE(absl::IsNotFound(empty.status())) << empty.status();
}

TEST(WholeFile, ABadByteOnDiskIsCaughtBeforeTheFileIsHandedOut) {
  ScratchDir dir;
  const StoreOptions options = SmallStoreOptions(dir, 8 << 20, kChunkSize);
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_NO_FATAL_FAILURE(InsertWholeFile(**store));
  ASSERT_NO_FATAL_FAILURE(FlipDataFileByte(options, kChunkSize + 7));
  auto whole =
      (*store)->OpenWholeFile(kVersion, kFileId, kFileSize, kChunkSize, WholeFileUse::kReadNow);
  EXPECT_TRUE(absl::IsNotFound(whole.status())) << whole.status();
  EXPECT_FALSE((*store)->Contains(Key(1))) << "the bad chunk is dropped";
  EXPECT_TRUE((*store)->Contains(Key(0)));
  EXPECT_EQ((*store)->Stats().checksum_failures, 1u);
  // Fetched again, the file is whole and right.
  ASSERT_NO_FATAL_FAILURE(Insert(**store, 1));
  whole = (*store)->OpenWholeFile(kVersion, kFileId, kFileSize, kChunkSize, WholeFileUse::kReadNow);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_TRUE(ReadAll(whole->fd.get()) == SourceFile());
}

TEST(WholeFile, AByteWrittenAfterItWasVerifiedIsCaughtAtTheNextRequest) {
  ScratchDir dir;
  const StoreOptions options = SmallStoreOptions(dir, 8 << 20, kChunkSize);
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_NO_FATAL_FAILURE(InsertWholeFile(**store));
  ASSERT_TRUE((*store)
                  ->OpenWholeFile(kVersion, kFileId, kFileSize, kChunkSize, WholeFileUse::kReadNow)
                  .ok());
  ASSERT_NO_FATAL_FAILURE(FlipDataFileByte(options, 2 * kChunkSize + 3));
  auto whole =
      (*store)->OpenWholeFile(kVersion, kFileId, kFileSize, kChunkSize, WholeFileUse::kReadNow);
  EXPECT_TRUE(absl::IsNotFound(whole.status())) << whole.status();
  EXPECT_FALSE((*store)->Contains(Key(2))) << "the bad chunk is dropped";
  EXPECT_EQ((*store)->Stats().checksum_failures, 1u);
}

TEST(WholeFile, AFileTheStoreWroteIsHandedOutWithoutBeingReadBackUntilItReopens) {
  ScratchDir dir;
  const StoreOptions options = SmallStoreOptions(dir, 8 << 20, kChunkSize);
  {
    auto store = ChunkStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    for (uint32_t chunk : {1u, 2u, 0u}) ASSERT_NO_FATAL_FAILURE(Insert(**store, chunk));
    auto whole =
        (*store)->OpenWholeFile(kVersion, kFileId, kFileSize, kChunkSize, WholeFileUse::kReadNow);
    ASSERT_TRUE(whole.ok()) << whole.status();
    EXPECT_TRUE(ReadAll(whole->fd.get()) == SourceFile());
    EXPECT_EQ((*store)->Stats().read_bytes, 0u);
  }
  // Reopened, it is read back once: by the open if it was not synced yet,
  // otherwise before it is first handed out.
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)
                  ->OpenWholeFile(kVersion, kFileId, kFileSize, kChunkSize, WholeFileUse::kReadNow)
                  .ok());
  ASSERT_TRUE((*store)
                  ->OpenWholeFile(kVersion, kFileId, kFileSize, kChunkSize, WholeFileUse::kReadNow)
                  .ok());
  EXPECT_EQ((*store)->Stats().read_bytes, kFileSize);
}

TEST(WholeFile, AFileAskedAheadIsHandedOutOnlyVerifiedAndIsNotAUse) {
  ScratchDir dir;
  const StoreOptions options = SmallStoreOptions(dir, 8 << 20, kChunkSize);
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_NO_FATAL_FAILURE(InsertWholeFile(**store));
  const StoreStats before = (*store)->Stats();
  auto ahead =
      (*store)->OpenWholeFile(kVersion, kFileId, kFileSize, kChunkSize, WholeFileUse::kAhead);
  ASSERT_TRUE(ahead.ok()) << ahead.status() << ": written here, so verified";
  EXPECT_TRUE(ReadAll(ahead->fd.get()) == SourceFile());
  const StoreStats after = (*store)->Stats();
  EXPECT_EQ(after.whole_files_ahead, before.whole_files_ahead + 1);
  EXPECT_EQ(after.whole_files, before.whole_files);
  EXPECT_EQ(after.hits, before.hits) << "the open that uses it is reported by the reader";

  // Written behind the store's back (the same byte again: only its ctime
  // changes), the file must be read back before it is handed out: not for
  // an open to come, which would wait for that.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_NO_FATAL_FAILURE(WriteIntoTheDataFile(options, 9, SourceFile()[9]));
  ahead = (*store)->OpenWholeFile(kVersion, kFileId, kFileSize, kChunkSize, WholeFileUse::kAhead);
  EXPECT_TRUE(absl::IsNotFound(ahead.status())) << ahead.status();
  EXPECT_NE(ahead.status().message().find("not verified yet"), std::string::npos) << ahead.status();
  EXPECT_EQ((*store)->Stats().read_bytes, after.read_bytes);
  ASSERT_TRUE((*store)
                  ->OpenWholeFile(kVersion, kFileId, kFileSize, kChunkSize, WholeFileUse::kReadNow)
                  .ok());
  EXPECT_EQ((*store)->Stats().read_bytes, after.read_bytes + kFileSize);
  EXPECT_TRUE(
      (*store)->OpenWholeFile(kVersion, kFileId, kFileSize, kChunkSize, WholeFileUse::kAhead).ok());
}

TEST(WholeFile, AShortChunkBeforeTheLastIsNotHandedOutAsAFileWithAHole) {
  ScratchDir dir;
  auto store = ChunkStore::Open(SmallStoreOptions(dir, 8 << 20, kChunkSize));
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE(*(*store)->Insert(Key(0), kChunkSize, ChunkBytes(Key(0), kChunkSize - 10)));
  ASSERT_NO_FATAL_FAILURE(Insert(**store, 1));
  ASSERT_NO_FATAL_FAILURE(Insert(**store, 2));
  auto whole =
      (*store)->OpenWholeFile(kVersion, kFileId, kFileSize, kChunkSize, WholeFileUse::kReadNow);
  EXPECT_TRUE(absl::IsNotFound(whole.status())) << whole.status();
  EXPECT_NE(whole.status().message().find("chunk 0 is not in place"), std::string::npos)
      << whole.status();
}

TEST(WholeFile, IsVerifiedAgainAfterTheStoreIsReopened) {
  ScratchDir dir;
  const StoreOptions options = SmallStoreOptions(dir, 8 << 20, kChunkSize);
  {
    auto store = ChunkStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_NO_FATAL_FAILURE(InsertWholeFile(**store));
    ASSERT_TRUE(
        (*store)
            ->OpenWholeFile(kVersion, kFileId, kFileSize, kChunkSize, WholeFileUse::kReadNow)
            .ok());
  }
  // Damaged while granaryd was down, after the file was synced or not.
  ASSERT_NO_FATAL_FAILURE(FlipDataFileByte(options, 5));
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  auto whole =
      (*store)->OpenWholeFile(kVersion, kFileId, kFileSize, kChunkSize, WholeFileUse::kReadNow);
  EXPECT_TRUE(absl::IsNotFound(whole.status())) << whole.status();
  EXPECT_FALSE((*store)->Contains(Key(0)));
}

TEST(WholeFile, PaddedDirectIoFilesAreNeverHandedOut) {
  ScratchDir dir;
  StoreOptions options = SmallStoreOptions(dir, 8 << 20, kChunkSize);
  options.direct_io = true;
  auto store = ChunkStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_NO_FATAL_FAILURE(InsertWholeFile(**store));
  auto whole =
      (*store)->OpenWholeFile(kVersion, kFileId, kFileSize, kChunkSize, WholeFileUse::kReadNow);
  EXPECT_TRUE(absl::IsNotFound(whole.status())) << whole.status();
  for (uint32_t chunk = 0; chunk < 3; ++chunk) {
    auto read = (*store)->Read(Key(chunk));
    ASSERT_TRUE(read.ok()) << read.status();
  }
}

// Whether each 4 KiB page of `path` is in the page cache.
std::vector<bool> PagesInPageCache(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << path;
  std::vector<bool> pages = granary::testing::ResidentPages(fd, std::filesystem::file_size(path));
  EXPECT_FALSE(pages.empty()) << path << ": " << std::strerror(errno);
  ::close(fd);
  return pages;
}

// Stores the whole file with `options` and checks that it reads back and is
// handed out whole, the source file byte for byte; returns which pages of
// its data file the writes left in the page cache.
std::vector<bool> StoreWholeFileAndCheckIt(const StoreOptions& options) {
  auto store = ChunkStore::Open(options);
  EXPECT_TRUE(store.ok()) << store.status();
  if (!store.ok()) return {};
  InsertWholeFile(**store);
  const std::vector<std::filesystem::path> files = testing::DataFiles(options);
  EXPECT_EQ(files.size(), 1u);
  if (files.size() != 1) return {};
  EXPECT_EQ(std::filesystem::file_size(files[0]), kFileSize);
  std::vector<bool> pages = PagesInPageCache(files[0]);
  auto whole =
      (*store)->OpenWholeFile(kVersion, kFileId, kFileSize, kChunkSize, WholeFileUse::kReadNow);
  EXPECT_TRUE(whole.ok()) << whole.status();
  if (whole.ok()) {
    EXPECT_EQ(ReadAll(whole->fd.get()), SourceFile());
  }
  for (uint32_t chunk = 0; chunk < 3; ++chunk) {
    auto read = (*store)->Read(Key(chunk));
    EXPECT_TRUE(read.ok()) << read.status();
    if (read.ok()) {
      EXPECT_EQ(*read, ChunkBytes(Key(chunk), LengthOf(chunk)));
    }
  }
  return pages;
}

TEST(WholeFile, ChunksGoPastThePageCacheButForTheFilesLastPartialBlock) {
  ScratchDir dir;
  StoreOptions options = SmallStoreOptions(dir, 8 << 20, kChunkSize);
  ASSERT_TRUE(options.direct_writes);  // The default.
  options.direct_write_min_bytes = kChunkSize;
  const std::vector<bool> pages = StoreWholeFileAndCheckIt(options);
  // Chunks 0 and 1 are whole blocks; the last chunk's 1,234 bytes are not.
  ASSERT_EQ(pages.size(), 2 * kChunkSize / 4096 + 1)
      << "does " << dir.path() << " support O_DIRECT?";
  for (size_t page = 0; page + 1 < pages.size(); ++page) {
    EXPECT_FALSE(pages[page]) << "page " << page << " was written through the page cache";
  }
  EXPECT_TRUE(pages.back());

  // Chunks under direct_write_min_bytes (the default 1 MiB here), and all
  // chunks with direct writes off, go through the page cache.
  for (bool direct_writes : {true, false}) {
    SCOPED_TRACE(direct_writes ? "chunks under the minimum" : "direct writes off");
    ScratchDir buffered_dir;
    StoreOptions buffered = SmallStoreOptions(buffered_dir, 8 << 20, kChunkSize);
    buffered.direct_writes = direct_writes;
    for (bool in_page_cache : StoreWholeFileAndCheckIt(buffered)) EXPECT_TRUE(in_page_cache);
  }
}

TEST(WholeFile, FilesystemsWithoutODirectGetChunksThroughThePageCache) {
  ScratchDir dir;
  const std::string ramfs = dir.Sub("ramfs");
  std::filesystem::create_directories(ramfs);
  // ramfs has no O_DIRECT (tmpfs has had it since Linux 6.6).
  ASSERT_EQ(::mount("ramfs", ramfs.c_str(), "ramfs", 0, nullptr), 0)
      << "mount ramfs (needs root): " << std::strerror(errno);
  StoreOptions options = SmallStoreOptions(dir, 8 << 20, kChunkSize);
  options.direct_write_min_bytes = kChunkSize;
  options.directories = {ramfs + "/cache"};
  for (bool in_page_cache : StoreWholeFileAndCheckIt(options)) EXPECT_TRUE(in_page_cache);
  EXPECT_EQ(::umount(ramfs.c_str()), 0) << std::strerror(errno);
}

TEST(WholeFile, ReadersThatKeepDescriptorsLearnWhichFilesWereWithdrawn) {
  ScratchDir dir;
  auto store = ChunkStore::Open(SmallStoreOptions(dir, 8 << 20, kChunkSize));
  ASSERT_TRUE(store.ok()) << store.status();
  // A first report (after 0) is not the store's own number: keep nothing.
  ChunkStore::Withdrawn first = (*store)->WithdrawnSince(0);
  EXPECT_FALSE(first.complete);
  EXPECT_TRUE(first.files.empty());
  ASSERT_NO_FATAL_FAILURE(InsertWholeFile(**store));
  ASSERT_TRUE(*(*store)->Insert({kVersion + 1, kFileId, 0}, kChunkSize, "other version"));
  ChunkStore::Withdrawn none = (*store)->WithdrawnSince(first.through);
  EXPECT_TRUE(none.complete);
  EXPECT_TRUE(none.files.empty());
  EXPECT_EQ(none.through, first.through);

  const uint64_t hits = (*store)->Stats().hits;
  (*store)->RecordUse(kVersion, kFileId, 3);
  EXPECT_EQ((*store)->Stats().hits, hits + 3);

  ASSERT_TRUE((*store)->RemoveVersion(kVersion + 1).ok());
  ChunkStore::Withdrawn removed = (*store)->WithdrawnSince(none.through);
  EXPECT_TRUE(removed.complete);
  ASSERT_EQ(removed.files.size(), 1u);
  EXPECT_EQ(removed.files[0], std::make_pair(kVersion + 1, kFileId));
  EXPECT_TRUE((*store)->WithdrawnSince(removed.through).files.empty());

  // A number from an earlier opening of the store is not its own.
  store->reset();
  auto reopened = ChunkStore::Open(SmallStoreOptions(dir, 8 << 20, kChunkSize));
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_FALSE((*reopened)->WithdrawnSince(removed.through).complete);
}

}  // namespace
}  // namespace granary::store
