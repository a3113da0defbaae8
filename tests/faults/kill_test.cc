// SIGKILL of granaryd, round after round ($GRANARY_FAULT_ROUNDS, default 10):
//  - in the middle of a prewarm and of reads: readers through a real mount
//    see no error and no wrong byte (granary-fuse reads the source while the
//    server is down), every restart finds at least the chunks indexed before
//    the kill and none failing its checksum, and the prewarm that finally
//    completes fetches exactly the chunks still missing;
//  - while chunks that readers missed wait in the write-behind queue
//    (granary_write_behind_bytes above 0 when the kill comes): the same, and
//    every chunk the restarted server holds is whole and right.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "grpcpp/client_context.h"
#include "tests/faults/fault_fixture.h"
#include "tests/server/server_test_util.h"

namespace granary::testing {
namespace {

class KillTest : public FaultTest {
 protected:
  // Drops the source's pages from the page cache, so that reading it takes
  // the disk's time.
  void EvictSourceFromPageCache(const std::vector<SourceFile>& files) {
    for (const SourceFile& file : files) {
      int fd = ::open((source_ + "/" + file.path).c_str(), O_RDONLY | O_CLOEXEC);
      ASSERT_GE(fd, 0) << file.path;
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      ::close(fd);
    }
  }

  // Once the kills are over and `readers` stopped: every chunk the store
  // holds reads back right, and the readers saw no error and no wrong byte.
  // Sets `held` to the chunks the store holds; returns the readers' tally
  // with the store's verified reads added, for the table's row.
  ReadTally ExpectNothingWrong(const std::vector<SourceFile>& files, ReaderPool& readers,
                               int rounds, uint64_t* held) {
    ReadTally store;
    *held = VerifyCachedChunks(files, &store);
    EXPECT_EQ(store.bytes_wrong, 0u);
    EXPECT_EQ(Metric("granary_store_checksum_failures_total"), 0);
    ReadTally tally = readers.Tally();
    EXPECT_EQ(tally.errors, 0u) << tally.first_errors.front();
    EXPECT_EQ(tally.bytes_wrong, 0u);
    EXPECT_GT(tally.reads_verified, static_cast<uint64_t>(rounds));
    tally.reads_verified += store.reads_verified;
    return tally;
  }
};

TEST_F(KillTest, SigkillMidPrewarmAndMidReadLosesNothingAndServesNoWrongByte) {
  const int rounds = EnvInt("GRANARY_FAULT_ROUNDS", 10);
  // 512 MiB in 512 chunks: one prewarm worker needs several rounds.
  const std::vector<SourceFile> files = WriteSourceTree(source_, "shard-", 128, 4 * kChunk);
  StartServerAndRegister();
  Mount({"--rpc-timeout-ms", "2000", "--retry-server-ms", "200"});
  if (HasFatalFailure()) return;
  // Readers keep to a quarter of the files: what they read gets cached, and
  // the rest must stay for the prewarms that the kills interrupt.
  const std::vector<SourceFile> read_files(files.begin(), files.begin() + files.size() / 4);
  ReaderPool readers(mounted_, read_files, 4, /*seed=*/1);

  std::mt19937_64 random(7);
  v1::PrewarmRequest prewarm;
  prewarm.set_name("ds");
  prewarm.set_parallelism(1);
  double indexed_before_kill = 0;
  int interrupted = 0;
  double slowest_restart = 0;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    // The restarted store holds what was indexed before the kill, verified.
    EXPECT_GE(Metric("granary_store_chunks"), indexed_before_kill);
    EXPECT_EQ(Metric("granary_store_checksum_failures_total"), 0);

    // From the disk, not the page cache, so that a prewarm is still running
    // when the kill comes.
    EvictSourceFromPageCache(files);
    if (HasFatalFailure()) return;
    // Kill once the prewarm has fetched something in this life.
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto stream = stub_->Prewarm(&context, prewarm);
    v1::PrewarmProgress progress;
    while (stream->Read(&progress) && progress.chunks_done() == progress.chunks_already_cached() &&
           !progress.finished()) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(random() % 20));
    indexed_before_kill = Metric("granary_store_chunks");
    ASSERT_TRUE(server_->Kill().ok());
    interrupted += !stream->Finish().ok();
    // Readers go on against the source while the server is down.
    std::this_thread::sleep_for(std::chrono::milliseconds(200 + random() % 300));
    Clock::time_point restarting = Clock::now();
    absl::Status restarted = server_->Restart();
    ASSERT_TRUE(restarted.ok()) << restarted;
    slowest_restart = std::max(slowest_restart, SecondsSince(restarting));
    stub_ = server_->SocketStub();
  }
  EXPECT_GE(interrupted, rounds / 2) << "the prewarm finished before most kills";
  // Recovery replays the write-behind's journal and opens the index; it must
  // not wait out a timeout.
  constexpr double kServingAgainWithinSeconds = 5;
  EXPECT_LT(slowest_restart, kServingAgainWithinSeconds);

  // Without readers racing it, the last prewarm fetches exactly what is missing.
  readers.Stop();
  const double cached = Metric("granary_store_chunks");
  const double fetched_before = Metric("granary_source_reads_total");
  v1::PrewarmProgress last = PrewarmAll();
  EXPECT_TRUE(last.finished());
  EXPECT_EQ(last.failures_size(), 0);
  EXPECT_EQ(last.chunks_done(), last.chunks_total());
  EXPECT_EQ(last.chunks_already_cached(), cached);
  EXPECT_EQ(Metric("granary_source_reads_total") - fetched_before, last.chunks_total() - cached);

  uint64_t held = 0;
  ReadTally tally = ExpectNothingWrong(files, readers, rounds, &held);
  EXPECT_EQ(held, last.chunks_total());
  ReportFaultRow({"SIGKILL granaryd mid-prewarm and mid-read (4 readers through the mount)", rounds,
                  tally,
                  absl::StrFormat("reads never failed; granaryd serving again %.2f s after "
                                  "restart at worst; %d/%d prewarms interrupted",
                                  slowest_restart, interrupted, rounds)});
}

TEST_F(KillTest, SigkillWithChunksWaitingToBeStoredServesNoWrongByte) {
  const int rounds = EnvInt("GRANARY_FAULT_ROUNDS", 10);
  // 512 chunks: enough that the readers miss through every round.
  const std::vector<SourceFile> files = WriteSourceTree(source_, "piece-", 512, kChunk);
  StartServerAndRegister();
  Mount({"--rpc-timeout-ms", "2000", "--retry-server-ms", "200"});
  if (HasFatalFailure()) return;
  EvictSourceFromPageCache(files);
  if (HasFatalFailure()) return;
  ReaderPool readers(mounted_, files, 4, /*seed=*/2);

  std::mt19937_64 random(11);
  int killed_with_chunks_queued = 0;
  double most_queued = 0;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    EXPECT_EQ(Metric("granary_store_checksum_failures_total"), 0);
    double queued = 0;
    for (Clock::time_point start = Clock::now(); queued == 0 && SecondsSince(start) < 5;) {
      queued = Metric("granary_write_behind_bytes");
    }
    ASSERT_TRUE(server_->Kill().ok());
    killed_with_chunks_queued += queued > 0;
    most_queued = std::max(most_queued, queued);
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + random() % 200));
    absl::Status restarted = server_->Restart();
    ASSERT_TRUE(restarted.ok()) << restarted;
    stub_ = server_->SocketStub();
  }
  EXPECT_GE(killed_with_chunks_queued, rounds / 2) << "the write-behind queue was seldom busy";
  readers.Stop();

  uint64_t held = 0;
  ReadTally tally = ExpectNothingWrong(files, readers, rounds, &held);
  EXPECT_GT(held, 0u);
  ReportFaultRow({"SIGKILL granaryd with missed chunks waiting in write-behind (4 readers)", rounds,
                  tally,
                  absl::StrFormat("%d/%d kills came with chunks queued (up to %.1f MiB); every "
                                  "chunk held after restart verified",
                                  killed_with_chunks_queued, rounds, most_queued / (1 << 20))});
}

}  // namespace
}  // namespace granary::testing
