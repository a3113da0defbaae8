// The read path under concurrency and crashes: single-flight misses of
// whole chunks, misses of parts of one fetching their blocks, prewarm
// progress, prewarm resumed after kill -9, whole files handed to a local
// reader in memory before they are stored, and files held whole handed out
// ahead of their opens.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <latch>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/net/local_read_socket.h"
#include "common/net/server_address.h"
#include "grpcpp/client_context.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {
namespace {

constexpr uint32_t kChunk = 1 << 20;

class ReadPathTest : public GranarydTest {
 protected:
  // 1 GiB in 1,024 chunks, registered as "train": one prewarm worker takes far
  // longer than the first progress interval to fetch it all, even on a fast,
  // quiet machine, so a test can interrupt a prewarm that is under way.
  static constexpr int kLongPrewarmChunks = 1024;
  v1::PrewarmRequest RegisterLongPrewarmDataset() {
    constexpr int kChunksPerFile = 8;
    for (int i = 0; i < kLongPrewarmChunks / kChunksPerFile; ++i) {
      // A char, not "f": GCC 12 at -O3 warns falsely (-Wrestrict) on a string
      // literal + std::string.
      WriteSourceFile(root_, 'f' + std::to_string(i), PatternBytes(kChunksPerFile * kChunk, i));
    }
    Register("train", kChunk);
    v1::PrewarmRequest request;
    request.set_name("train");
    request.set_parallelism(1);
    return request;
  }

  // Reads progress until some chunks are done (or the stream ends); returns
  // the last message.
  static v1::PrewarmProgress AwaitFirstChunks(grpc::ClientReader<v1::PrewarmProgress>* reader) {
    v1::PrewarmProgress progress;
    while (reader->Read(&progress) && progress.chunks_done() == 0) {
    }
    return progress;
  }

  // Registers `name` over the source root and returns its manifest entries.
  std::vector<v1::ManifestEntry> Register(const std::string& name, uint32_t chunk_size) {
    v1::DatasetInfo info;
    grpc::Status added = AddDataset(stub_.get(), name, root_, chunk_size, &info);
    EXPECT_TRUE(added.ok()) << added.error_message();
    version_ = info.version();
    std::vector<v1::ManifestEntry> entries;
    EXPECT_TRUE(GetManifest(stub_.get(), name, 0, &entries).ok());
    return entries;
  }

  uint64_t FileId(const std::vector<v1::ManifestEntry>& entries, const std::string& path) {
    for (uint64_t id = 0; id < entries.size(); ++id) {
      if (entries[id].path() == path) return id;
    }
    ADD_FAILURE() << "no entry " << path;
    return 0;
  }

  std::string root_ = source_.path();
  uint64_t version_ = 0;
};

TEST_F(ReadPathTest, SixteenConcurrentMissesOfOneChunkReadTheSourceOnce) {
  StartServer();
  std::string content = PatternBytes(16u << 20, 3);  // One 16 MiB chunk: a slow fetch.
  WriteSourceFile(root_, "big.bin", content);
  auto entries = Register("big", 16u << 20);
  uint64_t id = FileId(entries, "big.bin");
  std::vector<ReadResult> results(16);
  std::vector<std::thread> readers;
  for (int i = 0; i < 16; ++i) {
    readers.emplace_back([&, i] {
      std::unique_ptr<v1::Granary::Stub> stub = server_->SocketStub();
      results[i] = ReadChunk(stub.get(), version_, id, 0);
    });
  }
  for (std::thread& reader : readers) reader.join();
  for (const ReadResult& result : results) {
    ASSERT_TRUE(result.status.ok()) << result.status.error_message();
    EXPECT_TRUE(result.data == content);
  }
  EXPECT_EQ(*server_->Metric("granary_source_reads_total"), 1);
  EXPECT_EQ(*server_->Metric("granary_bytes_from_source_total"), content.size());
}

TEST_F(ReadPathTest, ConcurrentMissesOfTheSameBlocksReadTheSourceOnce) {
  StartServer();
  constexpr uint32_t kBigChunk = 16u << 20;  // Held in part in 16 KiB blocks.
  std::string content = PatternBytes(kBigChunk, 7);
  WriteSourceFile(root_, "big.bin", content);
  auto entries = Register("big", kBigChunk);
  uint64_t id = FileId(entries, "big.bin");
  {  // The source's pages dropped: its read goes to the disk, a slow fetch.
    const int fd = ::open(absl::StrCat(root_, "/big.bin").c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::fdatasync(fd), 0);
    ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    ::close(fd);
  }
  // Sixteen readers of the same unaligned 4 MiB part, asked at once.
  constexpr uint32_t kOffset = 1000, kLength = 4u << 20;
  constexpr int kReaders = 16;
  std::vector<std::unique_ptr<v1::Granary::Stub>> stubs;
  for (int i = 0; i < kReaders; ++i) stubs.push_back(server_->SocketStub());
  std::vector<ReadResult> results(kReaders);
  std::latch start(kReaders);
  std::vector<std::thread> readers;
  for (int i = 0; i < kReaders; ++i) {
    readers.emplace_back([&, i] {
      start.arrive_and_wait();
      results[i] = ReadChunk(stubs[i].get(), version_, id, 0, kOffset, kLength);
    });
  }
  for (std::thread& reader : readers) reader.join();
  for (const ReadResult& result : results) {
    ASSERT_TRUE(result.status.ok()) << result.status.error_message();
    EXPECT_TRUE(result.data == content.substr(kOffset, kLength));
  }
  EXPECT_EQ(*server_->Metric("granary_source_reads_total"), 1);
  // The 16 KiB blocks around the part: 257 of them.
  EXPECT_EQ(*server_->Metric("granary_bytes_from_source_total"), 257 * (16 << 10));
}

TEST_F(ReadPathTest, AMissServedInPiecesCountsAsOneMissAndItsBytesOnce) {
  StartServer();
  std::string content = PatternBytes(16u << 20, 4);  // One chunk, answered in 1 MiB pieces.
  WriteSourceFile(root_, "big.bin", content);
  auto entries = Register("big", 16u << 20);
  uint64_t id = FileId(entries, "big.bin");
  std::unique_ptr<v1::Granary::Stub> stub = server_->SocketStub();
  ReadResult miss = ReadChunk(stub.get(), version_, id, 0);
  ASSERT_TRUE(miss.status.ok()) << miss.status.error_message();
  ASSERT_TRUE(miss.data == content);
  EXPECT_EQ(*server_->Metric("granary_cache_misses_total"), 1);
  EXPECT_EQ(*server_->Metric("granary_cache_hits_total"), 0);
  EXPECT_EQ(*server_->Metric("granary_source_reads_total"), 1);
  EXPECT_EQ(*server_->Metric("granary_bytes_from_source_total"), content.size());
  EXPECT_EQ(*server_->Metric("granary_bytes_from_cache_total"), 0);

  // Read again (from memory or the store): one hit serving the chunk once.
  ReadResult hit = ReadChunk(stub.get(), version_, id, 0);
  ASSERT_TRUE(hit.status.ok()) << hit.status.error_message();
  ASSERT_TRUE(hit.data == content);
  EXPECT_TRUE(hit.from_cache);
  EXPECT_EQ(*server_->Metric("granary_cache_misses_total"), 1);
  EXPECT_EQ(*server_->Metric("granary_cache_hits_total"), 1);
  EXPECT_EQ(*server_->Metric("granary_bytes_from_cache_total"), content.size());
  EXPECT_EQ(*server_->Metric("granary_source_reads_total"), 1);
}

TEST_F(ReadPathTest, MissesOfPartsOfAChunkFetchTheirBlocksAndAWholeReadCompletesIt) {
  StartServer();
  constexpr uint32_t kBigChunk = 16u << 20;
  // The checksum block of a 16 MiB chunk held in part: 1,024 to the chunk.
  constexpr uint64_t kBlock = 16 << 10;
  std::string content = PatternBytes(kBigChunk, 5);
  WriteSourceFile(root_, "big.bin", content);
  auto entries = Register("big", kBigChunk);
  uint64_t id = FileId(entries, "big.bin");
  std::unique_ptr<v1::Granary::Stub> stub = server_->SocketStub();
  auto source_bytes = [&] { return *server_->Metric("granary_bytes_from_source_total"); };
  // A miss of one block's bytes reads that block from the source, and holds it.
  ReadResult first = ReadChunk(stub.get(), version_, id, 0, 5u << 20, kBlock);
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  EXPECT_TRUE(first.data == content.substr(5u << 20, kBlock));
  EXPECT_FALSE(first.from_cache);
  EXPECT_EQ(source_bytes(), kBlock);
  EXPECT_EQ(*server_->Metric("granary_cache_misses_total"), 1);
  ASSERT_TRUE(server_->WaitForWriteBehind().ok());
  EXPECT_EQ(*server_->Metric("granary_store_used_bytes"), kBlock);
  ReadResult again = ReadChunk(stub.get(), version_, id, 0, (5u << 20) + 100, 4096);
  ASSERT_TRUE(again.status.ok()) << again.status.error_message();
  EXPECT_TRUE(again.from_cache);
  EXPECT_TRUE(again.data == content.substr((5u << 20) + 100, 4096));
  EXPECT_EQ(source_bytes(), kBlock);

  // Misses at once of parts at the start, across two blocks, at the end and
  // of many blocks: each gets its bytes, reading the blocks around them.
  struct Part {
    uint32_t offset;
    uint32_t length;  // 0: to the chunk's end.
  };
  const std::vector<Part> parts = {
      {0, 4096}, {(3u << 20) - 10, 20}, {kBigChunk - 100, 100}, {9u << 20, 3u << 20}};
  std::vector<ReadResult> results(parts.size());
  std::vector<std::thread> readers;
  for (size_t i = 0; i < parts.size(); ++i) {
    readers.emplace_back([&, i] {
      std::unique_ptr<v1::Granary::Stub> own = server_->SocketStub();
      results[i] = ReadChunk(own.get(), version_, id, 0, parts[i].offset, parts[i].length);
    });
  }
  for (std::thread& reader : readers) reader.join();
  for (size_t i = 0; i < parts.size(); ++i) {
    ASSERT_TRUE(results[i].status.ok()) << results[i].status.error_message();
    const size_t length = parts[i].length == 0 ? std::string::npos : parts[i].length;
    EXPECT_TRUE(results[i].data == content.substr(parts[i].offset, length)) << "part " << i;
  }
  const double blocks_read = kBlock + kBlock + 2 * kBlock + kBlock + (3u << 20);
  EXPECT_EQ(source_bytes(), blocks_read);
  ASSERT_TRUE(server_->WaitForWriteBehind().ok());
  EXPECT_EQ(*server_->Metric("granary_store_used_bytes"), blocks_read);

  // A read of the whole chunk reads the bytes it lacks from the source (the
  // blocks held from the store) and completes it in the store.
  ReadResult whole = ReadChunk(stub.get(), version_, id, 0);
  ASSERT_TRUE(whole.status.ok()) << whole.status.error_message();
  EXPECT_TRUE(whole.data == content);
  EXPECT_FALSE(whole.from_cache);
  ASSERT_TRUE(server_->WaitForWriteBehind().ok());
  EXPECT_EQ(*server_->Metric("granary_store_used_bytes"), kBigChunk);
  EXPECT_EQ(source_bytes(), kBigChunk);
  ReadResult later = ReadChunk(stub.get(), version_, id, 0, 7u << 20, 4096);
  ASSERT_TRUE(later.status.ok()) << later.status.error_message();
  EXPECT_TRUE(later.from_cache);
  EXPECT_TRUE(later.data == content.substr(7u << 20, 4096));
  EXPECT_EQ(source_bytes(), kBigChunk);
}

TEST_F(ReadPathTest, UnalignedRandomReadsCostTheSourceTheirDiskBlocks) {
  StartServer();
  constexpr uint32_t kFourMiB = 4u << 20;
  constexpr uint64_t kRead = 64 << 10;
  std::string content = PatternBytes(2 * kFourMiB, 6);
  WriteSourceFile(root_, "big.bin", content);
  auto entries = Register("big", kFourMiB);
  uint64_t id = FileId(entries, "big.bin");
  std::unique_ptr<v1::Granary::Stub> stub = server_->SocketStub();
  // 20 reads of 64 KiB, none starting on a 4 KiB boundary, far apart: each
  // costs the source the 17 disk blocks it covers, 1.0625 times its bytes.
  constexpr int kReads = 20;
  for (int i = 0; i < kReads; ++i) {
    const uint64_t offset = 1000 + i * (400u << 10);
    const auto chunk = static_cast<uint32_t>(offset / kFourMiB);
    ReadResult read =
        ReadChunk(stub.get(), version_, id, chunk, static_cast<uint32_t>(offset % kFourMiB), kRead);
    ASSERT_TRUE(read.status.ok()) << read.status.error_message();
    ASSERT_TRUE(read.data == content.substr(offset, kRead)) << "read " << i;
  }
  EXPECT_EQ(*server_->Metric("granary_bytes_from_source_total"), kReads * 17 * 4096);
  ASSERT_TRUE(server_->WaitForWriteBehind().ok());
  EXPECT_EQ(*server_->Metric("granary_store_used_bytes"), kReads * 17 * 4096);
}

TEST_F(ReadPathTest, PrewarmProgressIsMonotoneAndEndsAtExactlyOneHundredPercent) {
  StartServer();
  for (int i = 0; i < 20; ++i) {
    WriteSourceFile(root_, "part/" + std::to_string(i), PatternBytes(kChunk + 1000 * i, i));
  }
  WriteSourceFile(root_, "other/x", PatternBytes(3 * kChunk, 99));
  WriteSourceFile(root_, "empty", "");
  auto entries = Register("train", kChunk);

  v1::PrewarmRequest request;
  request.set_name("train");
  request.add_paths("part");
  request.set_parallelism(4);
  std::vector<v1::PrewarmProgress> progress;
  grpc::Status status = Prewarm(stub_.get(), request, &progress);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_FALSE(progress.empty());
  for (size_t i = 1; i < progress.size(); ++i) {
    EXPECT_GE(progress[i].bytes_done(), progress[i - 1].bytes_done());
    EXPECT_GE(progress[i].chunks_done(), progress[i - 1].chunks_done());
    EXPECT_FALSE(progress[i - 1].finished());
  }
  const v1::PrewarmProgress& last = progress.back();
  EXPECT_TRUE(last.finished());
  EXPECT_EQ(last.chunks_total(), 39u);  // part/0 is one chunk, the 19 others two.
  EXPECT_EQ(last.chunks_done(), last.chunks_total());
  EXPECT_EQ(last.bytes_done(), last.bytes_total());
  EXPECT_EQ(last.failures_size(), 0);
  EXPECT_EQ(*server_->Metric("granary_source_reads_total"), 39);

  // Everything is cached now: a second prewarm of the whole dataset fetches
  // only the other directory.
  request.clear_paths();
  progress.clear();
  ASSERT_TRUE(Prewarm(stub_.get(), request, &progress).ok());
  EXPECT_EQ(progress.back().chunks_already_cached(), 39u);
  EXPECT_EQ(progress.back().chunks_done(), 42u);
  EXPECT_EQ(*server_->Metric("granary_source_reads_total"), 42);
  EXPECT_EQ(*server_->Metric("granary_prewarm_bytes_remaining"), 0);

  // Reads after prewarm are hits.
  ReadResult read = ReadChunk(stub_.get(), version_, FileId(entries, "other/x"), 2);
  ASSERT_TRUE(read.status.ok());
  EXPECT_TRUE(read.from_cache);
}

TEST_F(ReadPathTest, APrewarmOfMoreThanTheCacheHoldsFailsNamingWhatIsHeld) {
  // 128 MiB in 4 MiB chunks against a cache of 64 MiB, the dataset in use.
  auto server = GranarydProcess::Start({.extra_args = {"--capacity", "64MiB"}});
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = *std::move(server);
  stub_ = server_->SocketStub();
  for (int i = 0; i < 32; ++i) {
    WriteSourceFile(root_, absl::StrCat("part-", i), PatternBytes(4u << 20, i));
  }
  Register("large", 4u << 20);
  v1::PrewarmRequest request;
  request.set_name("large");
  std::vector<v1::PrewarmProgress> progress;
  grpc::Status status = Prewarm(stub_.get(), request, &progress);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_NE(status.error_message().find("this node holds"), std::string::npos)
      << status.error_message();
  EXPECT_NE(status.error_message().find("of its 128.0 MiB (capacity 64.0 MiB"), std::string::npos)
      << status.error_message();
  ASSERT_FALSE(progress.empty());
  EXPECT_LT(progress.back().chunks_done(), progress.back().chunks_total());
  EXPECT_LE(*server_->Metric("granary_store_used_bytes"), 64u << 20);
}

TEST_F(ReadPathTest, StatusCountsTheCacheAsTheDiskDoes) {
  StartServer();
  for (int i = 0; i < 100; ++i) {
    WriteSourceFile(root_, absl::StrCat("tiny-", i), PatternBytes(100, i));
  }
  Register("tiny", kChunk);
  v1::PrewarmRequest request;
  request.set_name("tiny");
  std::vector<v1::PrewarmProgress> progress;
  ASSERT_TRUE(Prewarm(stub_.get(), request, &progress).ok());
  grpc::ClientContext context;
  v1::StatusResponse status;
  ASSERT_TRUE(stub_->Status(&context, v1::StatusRequest(), &status).ok());
  ASSERT_EQ(status.nodes_size(), 1);
  // 100 files of 100 bytes take a 4 KiB block each.
  EXPECT_EQ(status.nodes(0).used_bytes(), 100u * 4096);
  EXPECT_EQ(status.nodes(0).chunk_count(), 100u);
}

TEST_F(ReadPathTest, PrewarmListsEveryFailedFileAndFinishesTheRest) {
  StartServer();
  WriteSourceFile(root_, "good", PatternBytes(2 * kChunk, 1));
  WriteSourceFile(root_, "gone", PatternBytes(kChunk, 2));
  WriteSourceFile(root_, "changed", PatternBytes(kChunk, 3));
  Register("train", kChunk);
  std::filesystem::remove(root_ + "/gone");
  WriteSourceFile(root_, "changed", "different now");
  v1::PrewarmRequest request;
  request.set_name("train");
  std::vector<v1::PrewarmProgress> progress;
  ASSERT_TRUE(Prewarm(stub_.get(), request, &progress).ok());
  const v1::PrewarmProgress& last = progress.back();
  EXPECT_TRUE(last.finished());
  EXPECT_EQ(last.chunks_done(), 2u);
  ASSERT_EQ(last.failures_size(), 2);
  std::set<std::string> failed{last.failures(0).path(), last.failures(1).path()};
  EXPECT_EQ(failed, (std::set<std::string>{"gone", "changed"}));
  EXPECT_NE(last.failures(0).error().find(last.failures(0).path()), std::string::npos);
  // The audit says what came of it, not OK.
  EXPECT_NE(server_->log().find("Prewarm 'train': ABORTED: 2 failures; the first: "),
            std::string::npos)
      << server_->log();
}

TEST_F(ReadPathTest, PrewarmAfterKillNineFetchesOnlyTheMissingChunks) {
  StartServer();
  v1::PrewarmRequest request = RegisterLongPrewarmDataset();

  // Kill the server as soon as the prewarm is under way.
  {
    grpc::ClientContext context;
    auto reader = stub_->Prewarm(&context, request);
    v1::PrewarmProgress progress = AwaitFirstChunks(reader.get());
    ASSERT_GT(progress.chunks_done(), 0u);
    ASSERT_LT(progress.chunks_done(), progress.chunks_total()) << "prewarm finished too soon";
    ASSERT_TRUE(server_->Kill().ok());
    EXPECT_FALSE(reader->Finish().ok());
  }
  {
    absl::Status restarted = server_->Restart();
    ASSERT_TRUE(restarted.ok()) << restarted;
  }
  stub_ = server_->SocketStub();
  std::vector<v1::PrewarmProgress> progress;
  ASSERT_TRUE(Prewarm(stub_.get(), request, &progress).ok());
  const v1::PrewarmProgress& last = progress.back();
  EXPECT_EQ(last.chunks_done(), static_cast<uint64_t>(kLongPrewarmChunks));
  EXPECT_GT(last.chunks_already_cached(), 0u);
  EXPECT_EQ(*server_->Metric("granary_source_reads_total"),
            last.chunks_total() - last.chunks_already_cached());
}

TEST_F(ReadPathTest, ReadersMissesAreServedBeforeTheReadsOfAPrewarmRunningBesideThem) {
  StartServer();
  v1::PrewarmRequest request = RegisterLongPrewarmDataset();
  std::vector<v1::ManifestEntry> entries;
  ASSERT_TRUE(GetManifest(stub_.get(), "train", 0, &entries).ok());
  // The last file in the manifest's (byte) order, which the prewarm reaches last.
  const uint64_t last = FileId(entries, "f99");
  const std::string content = PatternBytes(8 * kChunk, 99);
  grpc::ClientContext context;
  auto prewarm = stub_->Prewarm(&context, request);
  const v1::PrewarmProgress progress = AwaitFirstChunks(prewarm.get());
  ASSERT_LT(progress.chunks_done(), progress.chunks_total()) << "prewarm finished too soon";
  // Misses of that file: each served at once, the prewarm's source reads
  // waiting for them. A read from the page cache is short, so the prewarm
  // asks for its turn while a reader reads only now and then: the file is
  // read until it has (every miss a range of its own).
  for (uint32_t i = 0; i < 60; ++i) {
    const uint64_t offset = 1000 + i * (128u << 10);
    const auto in_chunk = static_cast<uint32_t>(offset % kChunk);
    const uint32_t length = std::min<uint32_t>(64 << 10, kChunk - in_chunk);  // Cut at its end.
    ReadResult read = ReadChunk(stub_.get(), version_, last, static_cast<uint32_t>(offset / kChunk),
                                in_chunk, length);
    ASSERT_TRUE(read.status.ok()) << read.status.error_message();
    ASSERT_TRUE(read.data == content.substr(offset, length)) << "read " << i;
    if (i % 10 == 9 && *server_->Metric("granary_fill_source_waits_total") > 0) break;
  }
  EXPECT_EQ(*server_->Metric("granary_prewarm_running"), 1) << "the reads ran beside the prewarm";
  EXPECT_GT(*server_->Metric("granary_fill_source_waits_total"), 0);
  context.TryCancel();
  EXPECT_EQ(prewarm->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(ReadPathTest, CancelledPrewarmStopsServerSideWork) {
  StartServer();
  v1::PrewarmRequest request = RegisterLongPrewarmDataset();
  {
    grpc::ClientContext context;
    auto reader = stub_->Prewarm(&context, request);
    AwaitFirstChunks(reader.get());
    context.TryCancel();
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // The server notices within a progress interval and stops its workers.
  double running = 1;
  for (int i = 0; i < 100 && running != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    running = *server_->Metric("granary_prewarm_running");
  }
  EXPECT_EQ(running, 0);
  double fetched = *server_->Metric("granary_source_reads_total");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(*server_->Metric("granary_source_reads_total"), fetched);
  EXPECT_LT(fetched, kLongPrewarmChunks);
}

// Everything `fd` reads from its start, `size` bytes expected.
std::string ReadDescriptor(int fd, size_t size) {
  std::string bytes(size, '\0');
  const ssize_t n = ::pread(fd, bytes.data(), bytes.size(), 0);
  bytes.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return bytes;
}

TEST_F(ReadPathTest, AColdWholeFileAskedInMemoryIsAnsweredWithASealedCopyAndStoredBehind) {
  StartServer();
  const std::string content = PatternBytes(3 * kChunk + 1234, 7);
  WriteSourceFile(root_, "cold.bin", content);
  auto entries = Register("cold", kChunk);
  const ChunkKey file{version_, FileId(entries, "cold.bin"), 0};
  LocalChunkReader local(LocalReadSocketPath(server_->socket_path()));

  auto copy =
      local.OpenWholeFile(file, content.size(), kChunk, WholeFileFetch::kReadThroughInMemory);
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_TRUE(copy->in_memory);
  EXPECT_TRUE(ReadDescriptor(copy->fd.get(), content.size()) == content);
  EXPECT_EQ(::pwrite(copy->fd.get(), "x", 1, 0), -1) << "the copy is sealed";
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::ftruncate(copy->fd.get(), 1), 0);
  EXPECT_EQ(*server_->Metric("granary_source_reads_total"), 4);

  // Stored behind the answer: soon held whole, and then handed out as the
  // data file even to a reader that would take a copy.
  absl::StatusOr<LocalChunkReader::WholeFile> held;
  for (int i = 0; i < 250; ++i) {
    held = local.OpenWholeFile(file, content.size(), kChunk, WholeFileFetch::kHeldOnly);
    if (held.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_FALSE(held->in_memory);
  EXPECT_TRUE(ReadDescriptor(held->fd.get(), content.size()) == content);
  auto again =
      local.OpenWholeFile(file, content.size(), kChunk, WholeFileFetch::kReadThroughInMemory);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->in_memory);
  EXPECT_EQ(*server_->Metric("granary_source_reads_total"), 4) << "every chunk read once";
}

TEST_F(ReadPathTest, AWholeFileInMemoryIsRefusedForAChangedSourceOrTheWrongSize) {
  StartServer();
  const std::string content = PatternBytes(kChunk + 10, 8);
  WriteSourceFile(root_, "a.bin", content);
  WriteSourceFile(root_, "b.bin", content);
  auto entries = Register("changing", kChunk);
  LocalChunkReader local(LocalReadSocketPath(server_->socket_path()));
  const ChunkKey a{version_, FileId(entries, "a.bin"), 0};
  const ChunkKey b{version_, FileId(entries, "b.bin"), 0};

  auto wrong_size =
      local.OpenWholeFile(a, content.size() + 1, kChunk, WholeFileFetch::kReadThroughInMemory);
  EXPECT_TRUE(absl::IsInvalidArgument(wrong_size.status())) << wrong_size.status();

  WriteSourceFile(root_, "b.bin", PatternBytes(kChunk + 10, 9));
  auto changed =
      local.OpenWholeFile(b, content.size(), kChunk, WholeFileFetch::kReadThroughInMemory);
  EXPECT_TRUE(absl::IsFailedPrecondition(changed.status())) << changed.status();
  EXPECT_NE(changed.status().message().find("b.bin"), std::string::npos) << changed.status();

  auto served =
      local.OpenWholeFile(a, content.size(), kChunk, WholeFileFetch::kReadThroughInMemory);
  ASSERT_TRUE(served.ok()) << served.status() << ": other files are still served";
  EXPECT_TRUE(ReadDescriptor(served->fd.get(), content.size()) == content);
}

TEST_F(ReadPathTest, FilesAskedAheadComeBackWhenHeldWholeAndVerifiedAndNoneIsFetched) {
  StartServer();
  const std::string content = PatternBytes(2 * kChunk + 77, 10);
  for (const char* name : {"a.bin", "b.bin", "c.bin", "d.bin"}) {
    WriteSourceFile(root_, name, content);
  }
  auto entries = Register("ahead", kChunk);
  LocalChunkReader local(LocalReadSocketPath(server_->socket_path()));
  auto key_of = [&](const char* name) { return ChunkKey{version_, FileId(entries, name), 0}; };
  for (const char* held : {"b.bin", "d.bin"}) {
    ASSERT_TRUE(
        local.OpenWholeFile(key_of(held), content.size(), kChunk, WholeFileFetch::kReadThrough)
            .ok());
  }
  const double source_reads = *server_->Metric("granary_source_reads_total");
  const double hits = *server_->Metric("granary_cache_hits_total");

  const std::vector<AheadFile> ahead = {{key_of("b.bin").file_id, content.size()},
                                        {key_of("c.bin").file_id, content.size()},
                                        {key_of("d.bin").file_id, content.size()}};
  std::vector<AheadWholeFile> held;
  auto asked = local.OpenWholeFile(key_of("a.bin"), content.size(), kChunk,
                                   WholeFileFetch::kReadThroughInMemory, ahead, &held);
  ASSERT_TRUE(asked.ok()) << asked.status();
  EXPECT_TRUE(ReadDescriptor(asked->fd.get(), content.size()) == content);
  ASSERT_EQ(held.size(), 2u) << "b and d are held; c is not, and is not fetched for it";
  EXPECT_EQ(held[0].file_id, key_of("b.bin").file_id);
  EXPECT_EQ(held[1].file_id, key_of("d.bin").file_id);
  for (const AheadWholeFile& file : held) {
    EXPECT_FALSE(file.file.in_memory);
    EXPECT_NE(file.file.verified_ctime_ns, 0);
    EXPECT_TRUE(ReadDescriptor(file.file.fd.get(), content.size()) == content);
  }
  EXPECT_EQ(*server_->Metric("granary_source_reads_total"), source_reads + 3)
      << "a's three chunks only";
  EXPECT_EQ(*server_->Metric("granary_cache_hits_total"), hits)
      << "files handed out ahead are not counted until the reader reports their opens";
  EXPECT_EQ(*server_->Metric("granary_store_whole_files_ahead_total"), 2);

  // A file not held whole asked for held only: the answer is its miss, with
  // nothing ahead.
  held.clear();
  auto missing = local.OpenWholeFile(key_of("c.bin"), content.size(), kChunk,
                                     WholeFileFetch::kHeldOnly, ahead, &held);
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_TRUE(held.empty());

  // More files ahead than a request may name: refused, naming the limit;
  // the connection still serves.
  absl::StatusOr<sockaddr_un> address =
      UnixSocketAddress(LocalReadSocketPath(server_->socket_path()));
  ASSERT_TRUE(address.ok()) << address.status();
  const int socket = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(socket, reinterpret_cast<sockaddr*>(&*address), sizeof(*address)), 0);
  v1::LocalReadRequest request;
  key_of("b.bin").ToProto(request.mutable_key());
  request.mutable_whole_file()->set_size(content.size());
  request.mutable_whole_file()->set_chunk_size(kChunk);
  for (size_t i = 0; i <= kMaxAheadFiles; ++i) {
    v1::AheadFile* file = request.mutable_whole_file()->add_ahead();
    file->set_file_id(key_of("d.bin").file_id);
    file->set_size(content.size());
  }
  ASSERT_TRUE(SendLocalReadMessage(socket, request, {}).ok());
  v1::LocalReadResponse response;
  std::vector<UniqueFd> passed;
  ASSERT_TRUE(ReceiveLocalReadMessage(socket, &response, &passed).ok());
  EXPECT_EQ(response.code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(response.message().find("files ahead; at most 32"), std::string::npos)
      << response.message();
  EXPECT_TRUE(passed.empty());
  request.mutable_whole_file()->mutable_ahead()->DeleteSubrange(0, 2);
  ASSERT_TRUE(SendLocalReadMessage(socket, request, {}).ok());
  ASSERT_TRUE(ReceiveLocalReadMessage(socket, &response, &passed).ok());
  EXPECT_EQ(response.code(), 0) << response.message();
  EXPECT_EQ(passed.size(), 1u + kMaxAheadFiles - 1);
  ::close(socket);
}

}  // namespace
}  // namespace granary::testing
