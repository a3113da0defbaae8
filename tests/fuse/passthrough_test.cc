// FUSE passthrough over real mounts and a real granaryd: a file the server
// holds whole is read by the kernel from the cache's data file (it still
// reads after granary-fuse is killed, which no file served by granary-fuse
// does), its descriptor is kept so that later opens ask the server nothing
// (they are reported to it as hits instead), and so are those of the files
// after it that the server holds whole, a byte written into a kept data
// file never reaches a reader, and files the server reclaims are closed. A
// small file's cold open is answered from an in-memory copy of the bytes the
// server read, let go at its last release, while the server stores it.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "tests/fuse/mounted_tree.h"

namespace granary::testing {
namespace {

constexpr uint64_t kBigSize = 3 * kChunk + 17;
constexpr uint64_t kBigChunks = 4;
constexpr int kManyFiles = 12;

class PassthroughTest : public MountedTree {
 protected:
  void BuildTree() override {
    WriteFile(source_ + "/big.bin", RandomBytes(kBigSize, 1));
    WriteFile(source_ + "/small.bin", RandomBytes(100000, 2));
    for (int i = 0; i < kManyFiles; ++i) {
      WriteFile(absl::StrCat(source_, "/many/", i), RandomBytes(60000 + 1000 * i, 100 + i));
    }
  }

  double Metric(const std::string& name) {
    absl::StatusOr<double> value = server_->Metric(name);
    EXPECT_TRUE(value.ok()) << name << ": " << value.status();
    return value.ok() ? *value : -1;
  }

  // Reads `name` through the mount, which reads it through into the cache
  // (at the open, for a file this small), has granaryd verify it and hand it
  // out whole, and granary-fuse keep it.
  void CacheAndKeep(const std::string& name) {
    const double whole_before = Metric("granary_store_whole_files_total");
    ASSERT_TRUE(ReadWhole(mounted_ + "/" + name) == ReadWhole(source_ + "/" + name));
    // Should the first open not have been passed through, the kernel sends
    // its RELEASE in the background: until it arrives, the file is open
    // through granary-fuse and cannot be.
    for (int i = 0; i < 50 && Metric("granary_store_whole_files_total") == whole_before; ++i) {
      const int fd = ::open((mounted_ + "/" + name).c_str(), O_RDONLY);
      ASSERT_GE(fd, 0) << std::strerror(errno);
      ::close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_EQ(Metric("granary_store_whole_files_total"), whole_before + 1)
        << "an open was handed the whole file";
  }

  // The data file in the cache holding a copy of source file `name`.
  std::string DataFileOf(const std::string& name) {
    const std::string want = ReadWhole(source_ + "/" + name);
    for (const auto& entry : std::filesystem::recursive_directory_iterator(server_->data_dir())) {
      if (entry.path().extension() == ".dat" && entry.file_size() == want.size() &&
          ReadWhole(entry.path()) == want) {
        return entry.path();
      }
    }
    ADD_FAILURE() << "no data file holds " << name;
    return "";
  }

  // Descriptors granary-fuse holds whose target names `part`.
  int DescriptorsHeld(const std::string& part) {
    int held = 0;
    const std::string fds = "/proc/" + std::to_string(mount_->pid()) + "/fd";
    for (const auto& entry : std::filesystem::directory_iterator(fds)) {
      std::error_code error;
      const std::string target = std::filesystem::read_symlink(entry.path(), error).string();
      if (target.find(part) != std::string::npos) ++held;
    }
    return held;
  }
  // Of data files that have been unlinked.
  int DeletedDataFilesHeld() { return DescriptorsHeld(".dat (deleted)"); }
  // Of in-memory copies of files granaryd read through at their open.
  int MemoryCopiesHeld() { return DescriptorsHeld("/memfd:granary-read-through"); }
};

// The same mount with no memory for in-memory copies.
class PassthroughWithoutMemoryCopiesTest : public PassthroughTest {
 protected:
  std::vector<std::string> MountArgs() const override {
    std::vector<std::string> args = PassthroughTest::MountArgs();
    args.insert(args.end(), {"--cold-open-memory", "0"});
    return args;
  }
};

TEST_F(PassthroughTest, AFileHeldWholeIsReadByTheKernelItselfEvenAfterGranaryFuseDies) {
  const std::string want = ReadWhole(source_ + "/big.bin");
  ASSERT_TRUE(ReadWhole(mounted_ + "/big.bin") == want);
  const int fd = ::open((mounted_ + "/big.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  mount_->Kill();
  std::string got(want.size(), '\0');
  size_t done = 0;
  while (done < got.size()) {
    const ssize_t n = ::pread(fd, got.data() + done, std::min<size_t>(got.size() - done, 128 << 10),
                              static_cast<off_t>(done));
    ASSERT_GT(n, 0) << "at " << done << ": " << std::strerror(errno);
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  EXPECT_TRUE(got == want);
}

TEST_F(PassthroughTest, ASmallFileNeverReadIsReadThroughAtItsOpenAndPassedThroughFromMemory) {
  const std::string want = ReadWhole(source_ + "/big.bin");
  const double whole = Metric("granary_store_whole_files_total");
  const int fd = ::open((mounted_ + "/big.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  EXPECT_EQ(Metric("granary_source_reads_total"), kBigChunks) << "every chunk, once, at the open";
  EXPECT_EQ(Metric("granary_store_whole_files_total"), whole) << "no data file was handed out";
  EXPECT_EQ(MemoryCopiesHeld(), 1) << "the open was answered with the bytes read, in memory";
  mount_->Kill();
  std::string got(want.size(), '\0');
  EXPECT_EQ(::pread(fd, got.data(), got.size(), 0), static_cast<ssize_t>(got.size()));
  ::close(fd);
  EXPECT_TRUE(got == want);
}

TEST_F(PassthroughTest, AnInMemoryCopyGoesAtTheLastReleaseAndLaterOpensPassTheStoredFile) {
  const std::string want = ReadWhole(source_ + "/small.bin");
  ASSERT_TRUE(ReadWhole(mounted_ + "/small.bin") == want);
  // The kernel sends the RELEASE in the background.
  for (int i = 0; i < 100 && MemoryCopiesHeld() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(MemoryCopiesHeld(), 0) << "an in-memory copy was kept after its file was closed";
  ASSERT_NO_FATAL_FAILURE(CacheAndKeep("small.bin"));
  EXPECT_EQ(Metric("granary_source_reads_total"), 1)
      << "the bytes read for the first open were stored behind it, not read again";
  EXPECT_EQ(MemoryCopiesHeld(), 0);
}

// Until a file read cold is stored, every open of it gets an in-memory copy,
// let go at its last release: opens of the same files from many threads,
// each waiting for another's open of the file while releases end others,
// still read each file's own bytes. (DiskFullTest, where nothing can be
// stored, exercises this longer.)
TEST_F(PassthroughTest, ManyThreadsOpeningTheSameColdFilesEachReadTheirOwnBytes) {
  std::vector<std::string> want;
  for (int i = 0; i < kManyFiles; ++i)
    want.push_back(ReadWhole(absl::StrCat(source_, "/many/", i)));
  const std::string root = mounted_ + "/many/";
  std::atomic<int> wrong = 0;
  std::vector<std::thread> readers;
  for (int t = 0; t < 6; ++t) {
    readers.emplace_back([&, t] {
      for (int n = 0; n < 300; ++n) {
        const int i = (t * 7 + n * 5) % kManyFiles;
        if (ReadWhole(absl::StrCat(root, i)) != want[i]) ++wrong;
      }
    });
  }
  for (std::thread& reader : readers) reader.join();
  EXPECT_EQ(wrong, 0);
  EXPECT_TRUE(mount_->Running());
}

TEST_F(PassthroughTest, WithoutPassthroughTheSameReadWaitsForTheNextGranaryFuse) {
  const std::string want = ReadWhole(source_ + "/big.bin");
  ASSERT_TRUE(ReadWhole(mounted_ + "/big.bin") == want);
  auto plain = FuseMount::Start(server_->socket_address(), {"--no-passthrough"}, "ds");
  ASSERT_TRUE(plain.ok()) << plain.status();
  const int fd = ::open(((*plain)->path() + "/ds/big.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  (*plain)->Kill();
  std::atomic<bool> done = false;
  std::string got(want.size(), '\0');
  ssize_t read = -1;
  std::thread reader([&] {
    read = ::pread(fd, got.data(), got.size(), 0);
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(done) << "the read is served by granary-fuse, which is gone";
  absl::Status restarted = (*plain)->Restart();
  // A failed restart leaves the read blocked; unmounting ends it.
  if (!restarted.ok()) (*plain)->ForceUnmount();
  reader.join();
  ASSERT_TRUE(restarted.ok()) << restarted;
  EXPECT_EQ(read, static_cast<ssize_t>(want.size())) << std::strerror(errno);
  EXPECT_TRUE(got == want);
  ::close(fd);
}

TEST_F(PassthroughTest, TheNextOpensOfAKeptFileAskGranarydNothingAndAreReportedAsHits) {
  ASSERT_NO_FATAL_FAILURE(CacheAndKeep("big.bin"));
  const double whole = Metric("granary_store_whole_files_total");
  const double hits = Metric("granary_cache_hits_total");
  const std::string want = ReadWhole(source_ + "/big.bin");
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(ReadWhole(mounted_ + "/big.bin") == want);
  EXPECT_EQ(Metric("granary_store_whole_files_total"), whole) << "a kept file was asked for";
  // Reported within a report interval (1 s).
  for (int i = 0; i < 50 && Metric("granary_cache_hits_total") < hits + 5 * kBigChunks; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(Metric("granary_cache_hits_total"), hits + 5 * kBigChunks);
}

// The mount's reports to granaryd (every second) name the files granaryd
// withdrew; one that cannot name them closes every kept file. The first
// report goes before anything is kept, so none of the later ones is such.
TEST_F(PassthroughTest, AKeptFileStaysKeptAcrossTheMountsReportsToGranaryd) {
  ASSERT_NO_FATAL_FAILURE(CacheAndKeep("small.bin"));
  const double whole = Metric("granary_store_whole_files_total");
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_TRUE(ReadWhole(mounted_ + "/small.bin") == ReadWhole(source_ + "/small.bin"));
  EXPECT_EQ(Metric("granary_store_whole_files_total"), whole)
      << "a report closed the kept file, and its next open asked granaryd again";
}

TEST_F(PassthroughTest, AFirstOpenBringsTheNextHeldFilesAheadAndTheirOpensAskGranarydNothing) {
  auto stub = server_->SocketStub();
  grpc::ClientContext context;
  v1::PrewarmRequest request;
  request.set_name("ds");
  std::unique_ptr<grpc::ClientReader<v1::PrewarmProgress>> prewarm =
      stub->Prewarm(&context, request);
  v1::PrewarmProgress progress;
  while (prewarm->Read(&progress)) {
  }
  ASSERT_TRUE(prewarm->Finish().ok());
  const double whole = Metric("granary_store_whole_files_total");
  const double ahead = Metric("granary_store_whole_files_ahead_total");
  const double hits = Metric("granary_cache_hits_total");

  // In the manifest, "many/0" is followed by the other files of many/ and by
  // small.bin: all held whole, all come back with its open.
  EXPECT_TRUE(ReadWhole(mounted_ + "/many/0") == ReadWhole(source_ + "/many/0"));
  EXPECT_EQ(Metric("granary_store_whole_files_total"), whole + 1);
  EXPECT_EQ(Metric("granary_store_whole_files_ahead_total"), ahead + kManyFiles);
  for (int i = 1; i < kManyFiles; ++i) {
    const std::string name = absl::StrCat("many/", i);
    EXPECT_TRUE(ReadWhole(mounted_ + "/" + name) == ReadWhole(source_ + "/" + name)) << name;
  }
  EXPECT_TRUE(ReadWhole(mounted_ + "/small.bin") == ReadWhole(source_ + "/small.bin"));
  EXPECT_EQ(Metric("granary_store_whole_files_total"), whole + 1)
      << "an open of a file brought ahead asked granaryd";
  EXPECT_EQ(Metric("granary_store_whole_files_ahead_total"), ahead + kManyFiles);
  // Their opens are reported as uses (a hit per chunk), within a report
  // interval (1 s).
  const double every_file = 1 + kManyFiles;
  for (int i = 0; i < 50 && Metric("granary_cache_hits_total") < hits + every_file; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GE(Metric("granary_cache_hits_total"), hits + every_file);
}

TEST_F(PassthroughTest, AByteWrittenIntoAKeptDataFileNeverReachesAReader) {
  ASSERT_NO_FATAL_FAILURE(CacheAndKeep("small.bin"));
  const std::string data_file = DataFileOf("small.bin");
  ASSERT_FALSE(data_file.empty());
  const std::string want = ReadWhole(source_ + "/small.bin");
  const int fd = ::open(data_file.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const char bad = static_cast<char>(~want[4321]);
  ASSERT_EQ(::pwrite(fd, &bad, 1, 4321), 1);
  ::close(fd);
  const double failures = Metric("granary_store_checksum_failures_total");
  EXPECT_TRUE(ReadWhole(mounted_ + "/small.bin") == want);
  EXPECT_EQ(Metric("granary_store_checksum_failures_total"), failures + 1)
      << "the open found the kept file written since it was verified and had it verified again";
}

TEST_F(PassthroughTest, FilesGranarydReclaimsAreClosedByTheMount) {
  ASSERT_NO_FATAL_FAILURE(CacheAndKeep("big.bin"));
  ASSERT_NO_FATAL_FAILURE(CacheAndKeep("small.bin"));
  auto stub = server_->SocketStub();
  grpc::ClientContext context;
  v1::RemoveDatasetRequest request;
  request.set_name("ds");
  v1::RemoveDatasetResponse response;
  ASSERT_TRUE(stub->RemoveDataset(&context, request, &response).ok());
  for (int i = 0; i < 50 && DeletedDataFilesHeld() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(DeletedDataFilesHeld(), 0) << "reclaimed files' blocks are held by the mount";
}

TEST_F(PassthroughWithoutMemoryCopiesTest, AColdOpenWaitsForTheStoreAndIsHandedTheDataFile) {
  const std::string want = ReadWhole(source_ + "/small.bin");
  const double whole = Metric("granary_store_whole_files_total");
  const int fd = ::open((mounted_ + "/small.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  EXPECT_EQ(Metric("granary_store_whole_files_total"), whole + 1);
  EXPECT_EQ(MemoryCopiesHeld(), 0);
  std::string got(want.size(), '\0');
  EXPECT_EQ(::pread(fd, got.data(), got.size(), 0), static_cast<ssize_t>(got.size()));
  ::close(fd);
  EXPECT_TRUE(got == want);
}

}  // namespace
}  // namespace granary::testing
