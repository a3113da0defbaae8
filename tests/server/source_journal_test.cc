// The source journal of a real granaryd (--source-journal): every range read
// from the source is written down once, with what the store then kept; a
// range read again is one the store had lost in between (a damaged block
// dropped, its file withdrawn); a hit writes nothing; a read of bytes a read
// in flight is fetching waits for them and reads nothing; lines are
// appended across restarts, and the file is 0640. A journal that cannot be
// opened stops granaryd at start, naming it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/dataset/chunk_key.h"
#include "nlohmann/json.hpp"
#include "tests/server/server_test_util.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {
namespace {

constexpr uint32_t kChunk = 4 << 20;

class SourceJournalTest : public GranarydTest {
 protected:
  void SetUp() override {
    journal_ = journal_dir_.path() + "/source.jsonl";
    ASSERT_NO_FATAL_FAILURE(StartServer({.extra_args = {"--source-journal", journal_}}));
    content_ = PatternBytes(kChunk + 10000, 7);
    ASSERT_NO_FATAL_FAILURE(RegisterOneFile("d", "f.bin", content_, kChunk, &version_, &file_id_));
  }

  // Reads bytes [offset, offset + length) of chunk `chunk` and waits until
  // what was fetched is stored.
  void Read(uint32_t chunk, uint32_t offset, uint32_t length) {
    ReadResult read = ReadChunk(stub_.get(), version_, file_id_, chunk, offset, length);
    ASSERT_TRUE(read.status.ok()) << read.status.error_message();
    ASSERT_EQ(read.data,
              content_.substr(uint64_t{chunk} * kChunk + offset, length == 0 ? kChunk : length));
    ASSERT_TRUE(server_->WaitForWriteBehind().ok());
  }

  // The journal's lines of `event`, in order.
  std::vector<nlohmann::json> Lines(std::string_view event) const {
    std::vector<nlohmann::json> lines;
    std::ifstream in(journal_);
    for (std::string line; std::getline(in, line);) {
      nlohmann::json parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      EXPECT_FALSE(parsed.is_discarded()) << "not JSON: " << line;
      if (parsed.is_discarded() || parsed["event"] != event) continue;
      EXPECT_EQ(parsed["version"], FormatVersion(version_)) << line;
      EXPECT_EQ(parsed["file"], file_id_) << line;
      lines.push_back(std::move(parsed));
    }
    return lines;
  }

  TempDir journal_dir_;
  std::string journal_;
  std::string content_;
  uint64_t version_ = 0;
  uint64_t file_id_ = 0;
};

TEST_F(SourceJournalTest, EachRangeIsReadOnceAndWhatWasKeptIsWrittenDown) {
  ASSERT_NO_FATAL_FAILURE(Read(0, 100'000, 5'000));
  std::vector<nlohmann::json> reads = Lines("source_read");
  ASSERT_EQ(reads.size(), 1u);
  const uint64_t begin = reads[0]["offset"], length = reads[0]["length"];
  EXPECT_EQ(reads[0]["dataset"], "d");
  EXPECT_EQ(reads[0]["chunk"], 0);
  EXPECT_EQ(reads[0]["for"], "reader");
  EXPECT_LE(begin, 100'000u);
  EXPECT_GE(begin + length, 105'000u);
  EXPECT_LE(length, 16u << 10) << "a reader's miss reads its blocks, not the chunk";
  EXPECT_LE(reads[0]["began"].get<double>(), reads[0]["t"].get<double>());
  std::vector<nlohmann::json> kept = Lines("kept");
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0]["offset"], begin);
  EXPECT_EQ(kept[0]["length"], length);
  EXPECT_GE(kept[0]["t"].get<double>(), reads[0]["t"].get<double>());

  // A hit reads nothing; the whole chunk then costs the source what it lacks.
  ASSERT_NO_FATAL_FAILURE(Read(0, 100'000, 5'000));
  EXPECT_EQ(Lines("source_read").size(), 1u);
  ASSERT_NO_FATAL_FAILURE(Read(0, 0, 0));
  reads = Lines("source_read");
  uint64_t read_bytes = length;
  for (size_t i = 1; i < reads.size(); ++i) {
    read_bytes += reads[i]["length"].get<uint64_t>();
    const uint64_t offset = reads[i]["offset"], end = offset + reads[i]["length"].get<uint64_t>();
    EXPECT_TRUE(end <= begin || offset >= begin + length)
        << "bytes [" << offset << ", " << end << ") read again while held";
  }
  EXPECT_EQ(read_bytes, kChunk);
  kept = Lines("kept");
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[1]["offset"], 0);
  EXPECT_EQ(kept[1]["length"], kChunk);
  EXPECT_TRUE(Lines("withdrawn").empty());

  struct stat info;
  ASSERT_EQ(::stat(journal_.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0640u);
}

TEST_F(SourceJournalTest, BytesReadAgainWereWithdrawnFirstAndLinesOutliveRestarts) {
  ASSERT_NO_FATAL_FAILURE(Read(0, 0, 0));
  ASSERT_EQ(Lines("source_read").size(), 1u);
  ASSERT_TRUE(server_->Restart().ok());
  stub_ = server_->SocketStub();
  ASSERT_EQ(Lines("source_read").size(), 1u) << "a restart keeps the journal";

  // A flipped byte of the cached chunk: the read drops it and reads it again.
  std::vector<std::filesystem::path> data_files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(server_->data_dir())) {
    if (entry.path().extension() == ".dat") data_files.push_back(entry);
  }
  ASSERT_EQ(data_files.size(), 1u);
  const int fd = ::open(data_files[0].c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  char byte = 0;
  ASSERT_EQ(::pread(fd, &byte, 1, 4096), 1);
  byte = static_cast<char>(~byte);
  ASSERT_EQ(::pwrite(fd, &byte, 1, 4096), 1);
  ::close(fd);
  ASSERT_NO_FATAL_FAILURE(Read(0, 0, 8192));

  const std::vector<nlohmann::json> reads = Lines("source_read");
  const std::vector<nlohmann::json> withdrawn = Lines("withdrawn");
  ASSERT_EQ(reads.size(), 2u);
  ASSERT_EQ(withdrawn.size(), 1u);
  EXPECT_LE(withdrawn[0]["t"].get<double>(), reads[1]["began"].get<double>())
      << "the file was withdrawn before its bytes were read again";
  EXPECT_EQ(reads[1]["offset"], 0);
}

TEST_F(SourceJournalTest, AReadOfBytesAnotherReadIsFetchingWaitsForThemInsteadOfReadingThem) {
  // One 64 MiB chunk whose pages are not in memory: its read takes a while.
  const std::string content = PatternBytes(64 << 20, 8);
  uint64_t version = 0, file_id = 0;
  ASSERT_NO_FATAL_FAILURE(RegisterOneFile("big", "big.bin", content, 64 << 20, &version, &file_id));
  const std::string source_file = source_.path() + "/big.bin";
  const int fd = ::open(source_file.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
  ::close(fd);
  const double reads_before = *server_->Metric("granary_source_reads_total");

  std::thread whole([&] {
    ReadResult read = ReadChunk(stub_.get(), version, file_id, 0);
    EXPECT_TRUE(read.status.ok()) << read.status.error_message();
    EXPECT_TRUE(read.data == content);
  });
  // Once the whole chunk's source read began, a reader asks for 64 KiB of it.
  while (*server_->Metric("granary_source_reads_total") == reads_before) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  const double asked =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  ReadResult part = ReadChunk(stub_.get(), version, file_id, 0, 40 << 20, 64 << 10);
  whole.join();
  ASSERT_TRUE(part.status.ok()) << part.status.error_message();
  EXPECT_TRUE(part.data == content.substr(40 << 20, 64 << 10));

  std::vector<nlohmann::json> reads;
  std::ifstream in(journal_);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json parsed = nlohmann::json::parse(line);
    if (parsed["event"] == "source_read" && parsed["dataset"] == "big") reads.push_back(parsed);
  }
  ASSERT_EQ(reads.size(), 1u) << "the part was read from the source again";
  EXPECT_EQ(reads[0]["length"], 64u << 20);
  EXPECT_GT(reads[0]["t"].get<double>(), asked) << "the whole chunk was read before the part "
                                                   "was asked for: nothing was in flight";
}

TEST(SourceJournalStart, AJournalThatCannotBeOpenedStopsGranarydNamingIt) {
  TempDir data;
  auto relative = RunGranaryd({"--data-dir", data.path(), "--socket", data.path() + "/s.sock",
                               "--metrics-listen", "127.0.0.1:0", "--source-journal", "j.jsonl"});
  ASSERT_TRUE(relative.ok()) << relative.status();
  EXPECT_NE(relative->exit_code, 0);
  EXPECT_NE(relative->stderr_text.find("source_journal 'j.jsonl' is not an absolute path"),
            std::string::npos)
      << relative->stderr_text;

  const std::string missing = data.path() + "/no/such/dir/j.jsonl";
  auto unreachable = RunGranaryd({"--data-dir", data.path(), "--socket", data.path() + "/s.sock",
                                  "--metrics-listen", "127.0.0.1:0", "--source-journal", missing});
  ASSERT_TRUE(unreachable.ok()) << unreachable.status();
  EXPECT_NE(unreachable->exit_code, 0);
  EXPECT_NE(unreachable->stderr_text.find("source_journal " + missing), std::string::npos)
      << unreachable->stderr_text;
  EXPECT_NE(unreachable->stderr_text.find("No such file or directory"), std::string::npos)
      << unreachable->stderr_text;
}

}  // namespace
}  // namespace granary::testing
