// Bytes flipped in granaryd's data files, round after round
// ($GRANARY_FAULT_ROUNDS, default 10): every read of a damaged chunk is a
// checksum failure that the server counts, answers from the source with the
// right bytes and stores again; no read fails and no wrong byte is served.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/dataset/chunk_math.h"
#include "tests/faults/fault_fixture.h"
#include "tests/server/server_test_util.h"

namespace granary::testing {
namespace {

class CorruptionTest : public FaultTest {
 protected:
  // Flips one byte inside every copy of each chunk in `chunks` found in the
  // data files, found by its first bytes at 4 KiB-aligned offsets (chunks lie
  // at multiples of the chunk size). Returns the number of copies found per
  // chunk. Chunks read through in an earlier round are stored behind their
  // reads, so it first waits for those stores.
  std::vector<int> FlipChunks(const std::vector<std::pair<const SourceFile*, uint32_t>>& chunks,
                              std::mt19937_64& random) {
    absl::Status stored = server_->WaitForWriteBehind();
    EXPECT_TRUE(stored.ok()) << stored;
    std::vector<int> copies(chunks.size(), 0);
    for (const auto& entry : std::filesystem::recursive_directory_iterator(server_->data_dir())) {
      if (entry.path().extension() != ".dat") continue;
      std::ifstream in(entry.path(), std::ios::binary);
      const std::string data_file((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
      int fd = ::open(entry.path().c_str(), O_WRONLY | O_CLOEXEC);
      EXPECT_GE(fd, 0) << entry.path();
      for (size_t i = 0; i < chunks.size(); ++i) {
        const auto& [file, index] = chunks[i];
        const uint64_t length = ChunkLength(file->size, kChunk, index);
        const std::string head = ExpectedBytes(file->seed, uint64_t{index} * kChunk, 4096);
        for (size_t at = 0; at + length <= data_file.size(); at += 4096) {
          if (data_file.compare(at, head.size(), head) != 0) continue;
          const uint64_t offset = at + random() % length;
          const char byte = static_cast<char>(data_file[offset] ^ (1 + random() % 255));
          EXPECT_EQ(::pwrite(fd, &byte, 1, static_cast<off_t>(offset)), 1);
          ++copies[i];
        }
      }
      ::close(fd);
    }
    return copies;
  }
};

TEST_F(CorruptionTest, FlippedDataFileBytesAreDetectedOnEveryReadRefetchedAndCounted) {
  const int rounds = EnvInt("GRANARY_FAULT_ROUNDS", 10);
  constexpr int kChunksPerRound = 6;
  const std::vector<SourceFile> files = WriteSourceTree(source_, "part-", 40, 2 * kChunk + 12345);
  StartServerAndRegister();
  if (HasFatalFailure()) return;
  ASSERT_EQ(PrewarmAll().chunks_done(), 40u * 3);

  std::mt19937_64 random(11);
  ReadTally tally;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    std::set<std::pair<const SourceFile*, uint32_t>> chosen;
    while (chosen.size() < kChunksPerRound) {
      chosen.insert({&files[random() % files.size()], static_cast<uint32_t>(random() % 3)});
    }
    const std::vector<std::pair<const SourceFile*, uint32_t>> damaged(chosen.begin(), chosen.end());
    std::vector<int> copies = FlipChunks(damaged, random);
    for (size_t i = 0; i < damaged.size(); ++i) {
      ASSERT_GE(copies[i], 1) << damaged[i].first->path << " chunk " << damaged[i].second;
    }
    const double failures = Metric("granary_store_checksum_failures_total");
    const double fetched = Metric("granary_source_reads_total");
    // Each damaged chunk: one miss that is answered right, then a hit.
    for (int pass = 0; pass < 2; ++pass) {
      for (const auto& [file, index] : damaged) {
        const SourceFile& source = *file;
        ReadResult read = ReadChunk(stub_.get(), info_.version(), FileId(source.path), index);
        if (!read.status.ok()) {
          tally.errors++;
          ADD_FAILURE() << read.status.error_message();
          continue;
        }
        EXPECT_EQ(read.from_cache, pass == 1) << source.path << " chunk " << index;
        TallyRead(read.data,
                  ExpectedBytes(source.seed, uint64_t{index} * kChunk,
                                ChunkLength(source.size, kChunk, index)),
                  &tally);
      }
    }
    EXPECT_EQ(Metric("granary_store_checksum_failures_total") - failures, kChunksPerRound);
    EXPECT_EQ(Metric("granary_source_reads_total") - fetched, kChunksPerRound);
  }
  // Everything else still reads back right from the store.
  ReadTally store;
  EXPECT_EQ(VerifyCachedChunks(files, &store), 40u * 3);
  EXPECT_EQ(store.bytes_wrong, 0u);
  EXPECT_EQ(tally.errors, 0u);
  EXPECT_EQ(tally.bytes_wrong, 0u);
  tally.reads_verified += store.reads_verified;
  ReportFaultRow({absl::StrCat("Bytes flipped in data files (", kChunksPerRound,
                               " chunks a round, read over gRPC)"),
                  rounds, tally,
                  absl::StrCat("immediate: ", rounds * kChunksPerRound,
                               " damaged chunks, each detected at its first read, refetched and "
                               "stored again (granary_store_checksum_failures_total)")});
}

// The same through a mount whose files are passed through: granary-fuse keeps
// the data files of files held whole, and the kernel reads them itself, so a
// byte written into one must be caught before the next open is passed
// through (the data file's ctime changed since granaryd verified it).
TEST_F(CorruptionTest, FlippedBytesInPassedThroughFilesNeverReachAReaderOfTheMount) {
  const int rounds = EnvInt("GRANARY_FAULT_ROUNDS", 10);
  constexpr int kFilesPerRound = 3;
  const std::vector<SourceFile> files = WriteSourceTree(source_, "small-", 20, 200000);
  StartServerAndRegister();
  if (HasFatalFailure()) return;
  ASSERT_EQ(PrewarmAll().chunks_done(), 20u);
  Mount();
  if (HasFatalFailure()) return;
  ReadTally tally;
  // Handed out by granaryd verified, at their first opens or ahead of them,
  // then passed through and kept.
  for (const SourceFile& file : files) ReadAndVerify(mounted_ + "/" + file.path, file, &tally);
  EXPECT_EQ(
      Metric("granary_store_whole_files_total") + Metric("granary_store_whole_files_ahead_total"),
      20);

  std::mt19937_64 random(13);
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    std::set<std::pair<const SourceFile*, uint32_t>> chosen;
    while (chosen.size() < kFilesPerRound) chosen.insert({&files[random() % files.size()], 0});
    const std::vector<std::pair<const SourceFile*, uint32_t>> damaged(chosen.begin(), chosen.end());
    std::vector<int> copies = FlipChunks(damaged, random);
    for (size_t i = 0; i < damaged.size(); ++i) ASSERT_EQ(copies[i], 1) << damaged[i].first->path;
    const double failures = Metric("granary_store_checksum_failures_total");
    for (int pass = 0; pass < 2; ++pass) {
      for (const auto& [file, index] : damaged) {
        ReadAndVerify(mounted_ + "/" + file->path, *file, &tally);
      }
    }
    EXPECT_EQ(Metric("granary_store_checksum_failures_total") - failures, kFilesPerRound)
        << "each damaged file found once, at its next open";
  }
  EXPECT_EQ(tally.errors, 0u);
  EXPECT_EQ(tally.bytes_wrong, 0u);
  ReportFaultRow({absl::StrCat("Bytes flipped in data files of files passed through to the "
                               "kernel and kept by granary-fuse (",
                               kFilesPerRound, " files a round, read through the mount)"),
                  rounds, tally,
                  absl::StrCat("immediate: ", rounds * kFilesPerRound,
                               " damaged files, each found at its next open (the data file's "
                               "ctime changed since it was verified), verified again, its bad "
                               "chunk dropped and read through; no damaged byte passed through")});
}

}  // namespace
}  // namespace granary::testing
