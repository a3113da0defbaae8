// Ranged ReadChunk calls on a real granaryd: a hit is served from the store's
// checksum blocks covering the range, to the byte, at block boundaries and at
// the chunk's ends; a damaged block is detected by a range covering it only,
// counted, and answered from the source; whole-chunk cache-only reads (how
// peers copy chunks) are unchanged; a chunk held in part costs the source only
// what it lacks. The local read path (the data file's descriptor handed over
// the local read socket) gives the same bytes, finds a damaged block on the
// reader's side, and survives garbage.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "common/net/local_read_socket.h"
#include "common/net/server_address.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {
namespace {

constexpr uint32_t kChunk = 4 << 20;
// The store's default checksum block (StoreOptions::checksum_block_bytes).
constexpr uint32_t kBlock = 64 << 10;
// The checksum block of a 4 MiB chunk held in part (StoreOptions::partial_block_bytes).
constexpr uint32_t kPartialBlock = 4 << 10;
// Chunk 0 is whole; chunk 1 is 10,000 bytes.
constexpr uint32_t kTail = 10000;

class RangeReadTest : public GranarydTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartServer());
    content_ = PatternBytes(kChunk + kTail, 4);
    ASSERT_NO_FATAL_FAILURE(RegisterOneFile("d", "f.bin", content_, kChunk, &version_, &file_id_));
  }

  // Reads through the server and waits until what it read through is stored
  // (a miss is answered before its chunk is), for the tests' store-side steps.
  ReadResult Read(uint32_t chunk, uint32_t offset, uint32_t length) {
    ReadResult read = ReadChunk(stub_.get(), version_, file_id_, chunk, offset, length);
    absl::Status stored = server_->WaitForWriteBehind();
    EXPECT_TRUE(stored.ok()) << stored;
    return read;
  }

  std::string Expected(uint32_t chunk, uint32_t offset, uint32_t length) const {
    return content_.substr(uint64_t{chunk} * kChunk + offset, length);
  }

  // Inverts the byte at `offset` of chunk 0, which must be the only chunk
  // cached: it then starts the only data file.
  void FlipByteOfChunk0(uint64_t offset) {
    std::vector<std::filesystem::path> data_files;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(server_->data_dir())) {
      if (entry.path().extension() == ".dat") data_files.push_back(entry);
    }
    ASSERT_EQ(data_files.size(), 1u);
    const int fd = ::open(data_files[0].c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0) << data_files[0];
    char byte;
    ASSERT_EQ(::pread(fd, &byte, 1, static_cast<off_t>(offset)), 1);
    byte = static_cast<char>(~byte);
    ASSERT_EQ(::pwrite(fd, &byte, 1, static_cast<off_t>(offset)), 1);
    ::close(fd);
  }

  double Metric(std::string_view name) {
    auto value = server_->Metric(name);
    EXPECT_TRUE(value.ok()) << value.status();
    return value.ok() ? *value : -1;
  }

  std::string content_;
  uint64_t version_ = 0;
  uint64_t file_id_ = 0;
};

TEST_F(RangeReadTest, HitsAreExactAtBlockBoundariesAndChunkEnds) {
  ASSERT_TRUE(Read(0, 0, 0).status.ok());  // The miss that caches chunk 0.
  ASSERT_TRUE(Read(1, 0, 0).status.ok());
  struct Case {
    uint32_t chunk, offset, length;
  };
  std::vector<Case> cases = {{0, 0, 1},         {0, kChunk - 1, 1}, {0, kChunk - kBlock, kBlock},
                             {0, 5, 128 << 10}, {1, 0, kTail},      {1, kTail - 1, 1},
                             {1, 100, 200}};
  for (uint32_t boundary : {kBlock, 2 * kBlock, kChunk / 2, kChunk - kBlock}) {
    for (uint32_t offset : {boundary - 1, boundary, boundary + 1}) {
      for (uint32_t length : {1u, kBlock - 1, kBlock + 1, 128u << 10}) {
        cases.push_back({0, offset, std::min(length, kChunk - offset)});
      }
    }
  }
  const double served_before = Metric("granary_bytes_from_cache_total");
  uint64_t served = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "chunk " << c.chunk << " [" << c.offset << ", +" << c.length << ")");
    ReadResult read = Read(c.chunk, c.offset, c.length);
    ASSERT_TRUE(read.status.ok()) << read.status.error_message();
    EXPECT_TRUE(read.from_cache);
    EXPECT_TRUE(read.data == Expected(c.chunk, c.offset, c.length));
    served += read.data.size();
  }
  // Only the ranges were served from the cache, not their chunks.
  EXPECT_EQ(Metric("granary_bytes_from_cache_total") - served_before, served);
  EXPECT_EQ(Metric("granary_source_reads_total"), 2);

  // A range ending past the chunk is cut at its end; an offset past it is
  // OUT_OF_RANGE naming the chunk.
  ReadResult cut = Read(1, kTail - 10, 1000);
  ASSERT_TRUE(cut.status.ok()) << cut.status.error_message();
  EXPECT_TRUE(cut.data == Expected(1, kTail - 10, 10));
  ReadResult past = Read(1, kTail + 1, 1);
  EXPECT_EQ(past.status.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_NE(past.status.error_message().find("offset 10001 is past the end of chunk"),
            std::string::npos)
      << past.status.error_message();
  EXPECT_NE(past.status.error_message().find("(10000 bytes)"), std::string::npos)
      << past.status.error_message();
}

// With the cache full, a chunk stays held in part, and readers keep asking for
// blocks around its part and for it whole: each costs the source only the
// bytes not held.
TEST_F(RangeReadTest, AChunkHeldInPartCostsTheSourceOnlyWhatItLacks) {
  const uint32_t held = 1 << 20;
  ReadResult part = Read(0, held, kBlock);
  ASSERT_TRUE(part.status.ok()) << part.status.error_message();
  EXPECT_EQ(Metric("granary_bytes_from_source_total"), kBlock);

  const uint32_t around_offset = held - 2 * kPartialBlock;
  const uint32_t around_length = kBlock + 4 * kPartialBlock;
  ReadResult around = Read(0, around_offset, around_length);
  ASSERT_TRUE(around.status.ok()) << around.status.error_message();
  EXPECT_TRUE(around.data == Expected(0, around_offset, around_length));
  EXPECT_EQ(Metric("granary_bytes_from_source_total"), around_length);

  ReadResult whole = Read(0, 0, 0);
  ASSERT_TRUE(whole.status.ok()) << whole.status.error_message();
  EXPECT_TRUE(whole.data == Expected(0, 0, kChunk));
  EXPECT_EQ(Metric("granary_bytes_from_source_total"), kChunk);
  ReadResult again = Read(0, 0, 0);
  ASSERT_TRUE(again.status.ok()) << again.status.error_message();
  EXPECT_TRUE(again.from_cache) << "the chunk is held whole now";
}

TEST_F(RangeReadTest, DamagedBlockIsFoundByARangeCoveringItCountedAndRefetched) {
  ASSERT_TRUE(Read(0, 0, 0).status.ok());
  FlipByteOfChunk0(5 * kBlock + 7);                    // In block 5.
  ReadResult clean = Read(0, 2 * kBlock, 3 * kBlock);  // Blocks 2-4.
  ASSERT_TRUE(clean.status.ok()) << clean.status.error_message();
  EXPECT_TRUE(clean.from_cache);
  EXPECT_TRUE(clean.data == Expected(0, 2 * kBlock, 3 * kBlock));
  EXPECT_EQ(Metric("granary_store_checksum_failures_total"), 0);

  ReadResult damaged = Read(0, 6 * kBlock - 1, 1);  // The last byte of block 5.
  ASSERT_TRUE(damaged.status.ok()) << damaged.status.error_message();
  EXPECT_FALSE(damaged.from_cache);
  EXPECT_TRUE(damaged.data == Expected(0, 6 * kBlock - 1, 1));
  EXPECT_EQ(Metric("granary_store_checksum_failures_total"), 1);
  EXPECT_EQ(Metric("granary_source_reads_total"), 2);

  // Its disk block stored again (the chunk held in part): a hit with the
  // right bytes.
  ReadResult again = Read(0, 6 * kBlock - kPartialBlock, kPartialBlock);
  ASSERT_TRUE(again.status.ok()) << again.status.error_message();
  EXPECT_TRUE(again.from_cache);
  EXPECT_TRUE(again.data == Expected(0, 6 * kBlock - kPartialBlock, kPartialBlock));
}

TEST_F(RangeReadTest, CacheOnlyReadsOfWholeChunksAreHitsOrNotFound) {
  v1::ReadChunkRequest request;
  request.mutable_key()->set_dataset_version(version_);
  request.mutable_key()->set_file_id(file_id_);
  request.set_cache_only(true);
  EXPECT_EQ(ReadChunk(stub_.get(), request).status.error_code(), grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(Read(0, 0, 0).status.ok());
  ReadResult copy = ReadChunk(stub_.get(), request);
  ASSERT_TRUE(copy.status.ok()) << copy.status.error_message();
  EXPECT_TRUE(copy.from_cache);
  EXPECT_TRUE(copy.data == Expected(0, 0, kChunk));
}

TEST_F(RangeReadTest, LocalReadsGiveTheCachedBytesAndMissesAreNotFound) {
  const std::string local_socket = LocalReadSocketPath(server_->socket_path());
  struct stat st;
  ASSERT_EQ(::stat(local_socket.c_str(), &st), 0) << local_socket;
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u) << "the gRPC socket's mode";

  LocalChunkReader reader(local_socket);
  std::string chunk(kChunk, '\0');
  absl::Status miss = reader.Read({version_, file_id_, 0}, 0, chunk);
  EXPECT_TRUE(absl::IsNotFound(miss)) << miss;
  EXPECT_EQ(Metric("granary_source_reads_total"), 0) << "a local read never reads through";

  ASSERT_TRUE(Read(0, 0, 0).status.ok());
  ASSERT_TRUE(Read(1, 0, 0).status.ok());
  const double served_before = Metric("granary_bytes_from_cache_total");
  absl::Status whole = reader.Read({version_, file_id_, 0}, 0, chunk);
  ASSERT_TRUE(whole.ok()) << whole;
  EXPECT_TRUE(chunk == Expected(0, 0, kChunk));
  EXPECT_EQ(Metric("granary_bytes_from_cache_total") - served_before, kChunk);
  for (uint32_t offset : {0u, kBlock - 1, kBlock, 5 * kBlock + 3}) {
    std::string range(kBlock + 2, '\0');
    absl::Status read = reader.Read({version_, file_id_, 0}, offset, range);
    ASSERT_TRUE(read.ok()) << offset << ": " << read;
    EXPECT_TRUE(range == Expected(0, offset, kBlock + 2)) << offset;
  }
  EXPECT_EQ(Metric("granary_bytes_from_cache_total") - served_before, kChunk + 4 * (kBlock + 2))
      << "each read counts the bytes it read";
  std::string tail(kTail, '\0');
  ASSERT_TRUE(reader.Read({version_, file_id_, 1}, 0, tail).ok());
  EXPECT_TRUE(tail == Expected(1, 0, kTail));
  absl::Status past = reader.Read({version_, file_id_, 1}, kTail - 1, {tail.data(), 2});
  EXPECT_TRUE(absl::IsOutOfRange(past)) << past;
  EXPECT_EQ(Metric("granary_source_reads_total"), 2);
}

TEST_F(RangeReadTest, ALocalPrefetchOfAHeldChunkIsNoReadAndOfAMissIsNotFound) {
  LocalChunkReader reader(LocalReadSocketPath(server_->socket_path()));
  auto miss = reader.Locate({version_, file_id_, 0}, /*read_bytes=*/0);
  EXPECT_TRUE(absl::IsNotFound(miss.status())) << miss.status();
  ASSERT_TRUE(Read(0, 0, 0).status.ok());
  const double hits_before = Metric("granary_cache_hits_total");
  const double served_before = Metric("granary_bytes_from_cache_total");
  auto held = reader.Locate({version_, file_id_, 0}, /*read_bytes=*/0);
  EXPECT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(Metric("granary_cache_hits_total"), hits_before);
  EXPECT_EQ(Metric("granary_bytes_from_cache_total"), served_before);
  EXPECT_EQ(Metric("granary_source_reads_total"), 1) << "a prefetch never reads through";
}

TEST_F(RangeReadTest, ALocalReaderFindsADamagedBlockItself) {
  ASSERT_TRUE(Read(0, 0, 0).status.ok());
  FlipByteOfChunk0(5 * kBlock + 7);  // In block 5.
  LocalChunkReader reader(LocalReadSocketPath(server_->socket_path()));
  std::string clean(3 * kBlock, '\0');
  ASSERT_TRUE(reader.Read({version_, file_id_, 0}, 2 * kBlock, clean).ok());
  EXPECT_TRUE(clean == Expected(0, 2 * kBlock, 3 * kBlock));
  std::string chunk(kChunk, '\0');
  absl::Status damaged = reader.Read({version_, file_id_, 0}, 0, chunk);
  EXPECT_TRUE(absl::IsDataLoss(damaged)) << damaged;
  EXPECT_NE(damaged.message().find("at block 5"), std::string::npos) << damaged;
  EXPECT_NE(damaged.message().find(ChunkKey{version_, file_id_, 0}.ToString()), std::string::npos)
      << damaged;
}

TEST_F(RangeReadTest, GarbageOnTheLocalReadSocketIsAnsweredAndTheServerKeepsServing) {
  ASSERT_TRUE(Read(0, 0, 0).status.ok());
  const std::string path = LocalReadSocketPath(server_->socket_path());
  absl::StatusOr<sockaddr_un> address = UnixSocketAddress(path);
  ASSERT_TRUE(address.ok()) << address.status();
  const int socket = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(socket, reinterpret_cast<sockaddr*>(&*address), sizeof(*address)), 0);
  auto ask = [&](std::string_view bytes) {
    EXPECT_EQ(::send(socket, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
    v1::LocalReadResponse response;
    std::vector<UniqueFd> passed;
    absl::Status received = ReceiveLocalReadMessage(socket, &response, &passed);
    EXPECT_TRUE(received.ok()) << received;
    return response;
  };
  v1::LocalReadResponse garbage = ask("\xff\xff\xff\xff\xff");
  EXPECT_EQ(garbage.code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(garbage.message().find("could not be parsed"), std::string::npos) << garbage.message();
  v1::LocalReadResponse keyless = ask("\x10\x01");  // Only a field this version does not know.
  EXPECT_EQ(keyless.code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(keyless.message().find("names no chunk key"), std::string::npos) << keyless.message();
  ::close(socket);

  LocalChunkReader reader(path);
  std::string chunk(kChunk, '\0');
  ASSERT_TRUE(reader.Read({version_, file_id_, 0}, 0, chunk).ok());
  EXPECT_TRUE(chunk == Expected(0, 0, kChunk));
  ASSERT_TRUE(Read(0, 0, 1).status.ok()) << "gRPC still serves";
}

// A client may attach descriptors to its requests; granaryd never keeps
// them: a request with more than a whole-file answer could carry is refused,
// one with fewer is answered, and either way granaryd closes them at once.
TEST_F(RangeReadTest, DescriptorsAClientAttachesAreClosedAndTooManyAreRefused) {
  ASSERT_TRUE(Read(0, 0, 0).status.ok());
  absl::StatusOr<sockaddr_un> address =
      UnixSocketAddress(LocalReadSocketPath(server_->socket_path()));
  ASSERT_TRUE(address.ok()) << address.status();
  const int socket = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(socket, reinterpret_cast<sockaddr*>(&*address), sizeof(*address)), 0);
  const std::string fds = "/proc/" + std::to_string(server_->pid()) + "/fd";
  auto open_in_granaryd = [&] {
    return std::distance(std::filesystem::directory_iterator(fds),
                         std::filesystem::directory_iterator());
  };
  std::vector<UniqueFd> attached;
  for (size_t i = 0; i < kMaxPassedDescriptors + 8; ++i) {
    attached.emplace_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  }
  std::vector<int> too_many;
  for (const UniqueFd& fd : attached) too_many.push_back(fd.get());
  const std::span<const int> a_few = std::span<const int>(too_many).first(2);
  v1::LocalReadRequest request;
  ChunkKey{version_, file_id_, 0}.ToProto(request.mutable_key());
  const auto before = open_in_granaryd();
  for (int round = 0; round < 50; ++round) {
    v1::LocalReadResponse response;
    std::vector<UniqueFd> passed;
    ASSERT_TRUE(SendLocalReadMessage(socket, request, too_many).ok());
    ASSERT_TRUE(ReceiveLocalReadMessage(socket, &response, &passed).ok());
    EXPECT_EQ(response.code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
    EXPECT_NE(response.message().find("over the size limit"), std::string::npos)
        << response.message();
    ASSERT_TRUE(SendLocalReadMessage(socket, request, a_few).ok());
    ASSERT_TRUE(ReceiveLocalReadMessage(socket, &response, &passed).ok());
    EXPECT_EQ(response.code(), 0) << response.message();
    EXPECT_EQ(passed.size(), 1u) << "the chunk's data file";
  }
  ::close(socket);
  // 50 rounds sent 7,000 descriptors; a few more may be open for other
  // reasons (a data file, a connection).
  EXPECT_LT(open_in_granaryd(), before + 10);
}

TEST_F(RangeReadTest, ALocalReaderKeepsReadingAcrossAGranarydRestart) {
  ASSERT_TRUE(Read(0, 0, 0).status.ok());
  LocalChunkReader reader(LocalReadSocketPath(server_->socket_path()));
  std::string chunk(kChunk, '\0');
  ASSERT_TRUE(reader.Read({version_, file_id_, 0}, 0, chunk).ok());
  ASSERT_TRUE(server_->Restart().ok());
  chunk.assign(kChunk, '\0');
  absl::Status after = reader.Read({version_, file_id_, 0}, 0, chunk);
  ASSERT_TRUE(after.ok()) << after;
  EXPECT_TRUE(chunk == Expected(0, 0, kChunk));
}

TEST(LocalChunkReaderTest, NoServerIsUnavailableNamingTheSocket) {
  LocalChunkReader reader("/nonexistent/granaryd.sock.local");
  std::string chunk(16, '\0');
  absl::Status status = reader.Read({1, 1, 0}, 0, chunk);
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_NE(status.message().find("/nonexistent/granaryd.sock.local"), std::string::npos) << status;
}

}  // namespace
}  // namespace granary::testing
