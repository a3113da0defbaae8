// A real writer process is SIGKILLed at random moments, many times over the
// same store; after each kill the reopened store must index only complete
// chunks, or blocks of chunks held in part, whose checksums verify and whose
// bytes are the ones written, and count on disk what its files take.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <thread>

#include "cache_server/store/chunk_store.h"
#include "tests/store/crash_workload.h"
#include "tests/store/store_test_util.h"

namespace granary::store {
namespace {

using testing::ChunkBytes;
using testing::CrashChunkLength;
using testing::CrashStoreOptions;
using testing::ScratchDir;

constexpr int kRounds = 20;

// Starts the writer with its standard output on `ready_fd`'s pipe.
pid_t StartWriter(const std::string& root, int seed, int& ready_fd) {
  const std::string seed_text = std::to_string(seed);
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    ::execl(GRANARY_STORE_CRASH_WRITER, GRANARY_STORE_CRASH_WRITER, root.c_str(), seed_text.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  ready_fd = pipe_fds[0];
  return pid;
}

// Blocks until the writer has opened the store (or died).
void AwaitReady(int ready_fd) {
  char byte;
  while (::read(ready_fd, &byte, 1) == 1 && byte != '\n') {
  }
}

TEST(Crash, KilledWriterLeavesOnlyCompleteVerifiedChunks) {
  ScratchDir dir;
  const std::string root = dir.path().string();
  const StoreOptions options = CrashStoreOptions(root);
  std::mt19937_64 random(99);
  uint64_t verified = 0;
  uint64_t verified_blocks = 0;  // Of chunks held in part.
  for (int round = 0; round < kRounds; ++round) {
    int ready_fd = -1;
    const pid_t writer = StartWriter(root, round, ready_fd);
    ASSERT_GT(writer, 0);
    // One round in four kills the writer while it opens and recovers the
    // store; the others while it writes.
    if (round % 4 != 0) AwaitReady(ready_fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(random() % 150));
    ASSERT_EQ(::kill(writer, SIGKILL), 0);
    ::close(ready_fd);
    int status = 0;
    ASSERT_EQ(::waitpid(writer, &status, 0), writer);
    ASSERT_TRUE(WIFSIGNALED(status))
        << "the writer exited early with status " << WEXITSTATUS(status) << " in round " << round;

    auto store = ChunkStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    for (uint64_t version : testing::kCrashVersions) {
      for (const ChunkKey& key : (*store)->ChunksOf(version)) {
        if (!(*store)->Contains(key)) {
          // Held in part: each block is held and right, or a miss.
          const std::string expected = ChunkBytes(key, CrashChunkLength(key));
          uint64_t held = 0;
          for (uint64_t at = 0; at < expected.size(); at += testing::kCrashBlockBytes) {
            const uint64_t length = std::min(testing::kCrashBlockBytes, expected.size() - at);
            auto block = (*store)->ReadRange(key, at, length);
            if (absl::IsNotFound(block.status())) continue;
            ASSERT_TRUE(block.ok()) << key.ToString() << " at " << at << " in round " << round
                                    << ": " << block.status();
            ASSERT_TRUE(*block == expected.substr(at, length))
                << key.ToString() << " at " << at << " in round " << round;
            ++held;
          }
          EXPECT_GT(held, 0u) << key.ToString() << " is listed with no block held";
          verified_blocks += held;
          continue;
        }
        auto read = (*store)->Read(key);
        ASSERT_TRUE(read.ok()) << key.ToString() << " in round " << round << ": " << read.status();
        const std::string expected = ChunkBytes(key, CrashChunkLength(key));
        ASSERT_TRUE(*read == expected) << key.ToString() << " in round " << round;
        // And by its block checksums: the middle third, across blocks.
        const uint64_t third = expected.size() / 3;
        auto range = (*store)->ReadRange(key, third, third + 1);
        ASSERT_TRUE(range.ok()) << key.ToString() << " in round " << round << ": "
                                << range.status();
        ASSERT_TRUE(*range == expected.substr(third, third + 1))
            << key.ToString() << " in round " << round;
        ++verified;
      }
    }
    const StoreStats stats = (*store)->Stats();
    EXPECT_EQ(stats.checksum_failures, 0u);
    EXPECT_LE(testing::DataFileBytes(options), options.capacity_bytes);
    EXPECT_EQ(stats.disk_bytes, testing::DataFileBytes(options));
  }
  EXPECT_GT(verified, 0u);
  EXPECT_GT(verified_blocks, 0u);
  RecordProperty("chunks_verified", std::to_string(verified));
  RecordProperty("blocks_of_partial_chunks_verified", std::to_string(verified_blocks));
}

}  // namespace
}  // namespace granary::store
