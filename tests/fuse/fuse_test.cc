// granary-fuse over real mounts and a real granaryd: the tree and every byte
// match the source, reads survive the server's death, writes fail with EROFS,
// and a PyTorch DataLoader reads correct samples.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "tests/fuse/fuse_mount.h"
#include "tests/fuse/mounted_tree.h"
#include "tests/support/granaryd_process.h"
#include "tests/support/resident_pages.h"

namespace granary::testing {
namespace {

// ------------------------------------------------------------ the whole tree

class FuseTreeTest : public MountedTree {
 protected:
  void BuildTree() override {
    WriteFile(source_ + "/empty", "");
    WriteFile(source_ + "/sub/empty too", "");
    WriteFile(source_ + "/chunk_exact", RandomBytes(kChunk, 1));
    WriteFile(source_ + "/chunk_minus_1", RandomBytes(kChunk - 1, 2));
    WriteFile(source_ + "/chunk_plus_1", RandomBytes(kChunk + 1, 3));
    WriteFile(source_ + "/two_chunks_exact", RandomBytes(2 * kChunk, 4));
    WriteFile(source_ + "/name with spaces.txt", "spaces\n");
    WriteFile(source_ + "/ünïcødé 文件 ✓.bin", RandomBytes(5000, 5));
    WriteFile(source_ + "/dir with spaces/ñandú/数据.txt", "non-ascii\n");
    std::filesystem::create_directories(source_ + "/empty_dir");
    std::filesystem::create_directories(source_ + "/sub/empty_nested/also_empty");
    std::string deep = source_ + "/deep";
    for (int level = 1; level <= 40; ++level) deep += "/d" + std::to_string(level);
    WriteFile(deep + "/leaf.txt", "forty levels down\n");
    for (int i = 0; i < 10000; ++i) {
      char name[32];
      std::snprintf(name, sizeof(name), "/many/f%05d", i);
      WriteFile(source_ + name, RandomBytes(1 + i % 300, 100 + i));
    }
    // Over 1 GiB: sparse, with random blocks every 96 MiB and at the very end.
    const uint64_t big_size = (1ull << 30) + (3ull << 20) + 12345;
    int fd = open((source_ + "/big.bin").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0640);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, static_cast<off_t>(big_size)), 0);
    for (uint64_t at = 0; at < big_size; at += 96ull << 20) {
      std::string block = RandomBytes(kChunk, at);
      ASSERT_EQ(pwrite(fd, block.data(), block.size(), static_cast<off_t>(at)),
                static_cast<ssize_t>(block.size()));
    }
    std::string tail = RandomBytes(4096, 7);
    ASSERT_EQ(pwrite(fd, tail.data(), tail.size(), static_cast<off_t>(big_size - tail.size())),
              4096);
    close(fd);
    chmod((source_ + "/chunk_exact").c_str(), 0600);
    chmod((source_ + "/sub").c_str(), 0750);
  }
};

TEST_F(FuseTreeTest, DiffIsCleanAndSizesAndModesMatch) {
  auto started = std::chrono::steady_clock::now();
  auto [diff_code, diff_output] = Shell("diff -r '" + source_ + "' '" + mounted_ + "'");
  EXPECT_EQ(diff_code, 0) << diff_output.substr(0, 4000);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("diff -r of the whole tree (1 GiB file included) took %.1f s\n", seconds);

  // ls -lR's size and mode columns, for files (sizes) and directories (modes).
  const std::string listing =
      "find . -type f -printf '%p %M %s\\n' -o -type d -printf '%p %M\\n' | LC_ALL=C sort";
  auto [source_code, source_listing] = Shell("cd '" + source_ + "' && " + listing);
  auto [mount_code, mount_listing] = Shell("cd '" + mounted_ + "' && " + listing);
  ASSERT_EQ(source_code, 0);
  ASSERT_EQ(mount_code, 0);
  EXPECT_EQ(source_listing, mount_listing);
  EXPECT_NE(mount_listing.find("./many/f09999 "), std::string::npos);
  EXPECT_NE(mount_listing.find("/d40/leaf.txt -rw"), std::string::npos);
  EXPECT_NE(mount_listing.find("./chunk_exact -rw------- 1048576"), std::string::npos);

  struct stat st1, st2;
  ASSERT_EQ(stat((mounted_ + "/chunk_plus_1").c_str(), &st1), 0);
  ASSERT_EQ(stat((mounted_ + "/chunk_plus_1").c_str(), &st2), 0);
  EXPECT_EQ(st1.st_ino, st2.st_ino);
}

// ------------------------------------------------------------ reads

class FuseReadTest : public MountedTree {
 protected:
  void BuildTree() override {
    WriteFile(source_ + "/empty", "");
    WriteFile(source_ + "/chunk_minus_1", RandomBytes(kChunk - 1, 2));
    WriteFile(source_ + "/chunk_exact", RandomBytes(kChunk, 1));
    WriteFile(source_ + "/chunk_plus_1", RandomBytes(kChunk + 1, 3));
    WriteFile(source_ + "/odd", RandomBytes(3 * kChunk + 17, 4));
    for (int i = 0; i < 4; ++i) {
      WriteFile(source_ + "/big" + std::to_string(i) + ".bin",
                RandomBytes(24 * kChunk + i, 10 + i));
    }
    for (int i = 0; i < 300; ++i) {
      WriteFile(source_ + "/samples/s" + std::to_string(i), RandomBytes(1 + (i * 977) % 65536, i));
    }
  }

  std::vector<std::string> Files() const {
    return {"empty",    "chunk_minus_1", "chunk_exact", "chunk_plus_1", "odd",
            "big0.bin", "big1.bin",      "big2.bin",    "big3.bin"};
  }
};

TEST_F(FuseReadTest, RandomPreadsMatchSource) {
  std::vector<std::string> files = Files();
  std::vector<std::string> contents;
  std::vector<int> fds;
  for (const std::string& name : files) {
    contents.push_back(ReadWhole(source_ + "/" + name));
    fds.push_back(open((mounted_ + "/" + name).c_str(), O_RDONLY));
    ASSERT_GE(fds.back(), 0) << name;
  }
  std::mt19937_64 rng(42);
  std::string buffer(4 * kChunk, '\0');
  for (int i = 0; i < 10000; ++i) {
    size_t f = rng() % files.size();
    const std::string& want = contents[f];
    uint64_t offset = want.empty() ? 0 : rng() % (want.size() + 2);
    if (i % 4 == 0 && want.size() > kChunk) offset = kChunk - (rng() % 64);  // Straddle a chunk.
    size_t length = 1 + rng() % (i % 10 == 0 ? buffer.size() : 200000);
    ssize_t n = pread(fds[f], buffer.data(), length, static_cast<off_t>(offset));
    size_t expected = offset >= want.size() ? 0 : std::min<size_t>(length, want.size() - offset);
    ASSERT_EQ(n, static_cast<ssize_t>(expected)) << files[f] << " @" << offset << "+" << length;
    ASSERT_EQ(0, std::memcmp(buffer.data(), want.data() + std::min<size_t>(offset, want.size()),
                             expected))
        << files[f] << " @" << offset << "+" << length;
  }
  for (int fd : fds) close(fd);
}

TEST_F(FuseReadTest, EightConcurrentReaders) {
  std::vector<std::string> files = Files();
  std::atomic<int> mismatches{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 8; ++r) {
    readers.emplace_back([&, r] {
      // Readers 0-3 share big0.bin; the others read files of their own.
      for (const std::string& name :
           {files[r < 4 ? 5 : 5 + r - 4], files[r % files.size()], std::string("odd")}) {
        if (ReadWhole(mounted_ + "/" + name) != ReadWhole(source_ + "/" + name)) ++mismatches;
      }
    });
  }
  for (std::thread& reader : readers) reader.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// Reads through granary-fuse even of files the cache holds whole.
class FuseNoPassthroughReadTest : public FuseReadTest {
 protected:
  std::vector<std::string> MountArgs() const override {
    std::vector<std::string> args = FuseReadTest::MountArgs();
    args.push_back("--no-passthrough");
    return args;
  }
};

TEST_F(FuseNoPassthroughReadTest, ARandomReadOfAHeldChunkFillsTheKernelPageCacheWithIt) {
  const std::string name = "big1.bin";
  const std::string want = ReadWhole(source_ + "/" + name);
  // Read whole once, so that granaryd holds every chunk.
  ASSERT_TRUE(ReadWhole(mounted_ + "/" + name) == want);
  ASSERT_TRUE(server_->WaitForWriteBehind().ok());
  ASSERT_TRUE(mount_->Restart().ok());  // No chunk in granary-fuse's memory.
  int fd = open((mounted_ + "/" + name).c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
  std::string byte(1, '\0');
  const uint64_t read_at = 5 * kChunk + 1000;
  ASSERT_EQ(pread(fd, byte.data(), 1, static_cast<off_t>(read_at)), 1);
  EXPECT_EQ(byte[0], want[read_at]);

  const size_t first_page = 5 * kChunk / 4096, end_page = 6 * kChunk / 4096;
  std::vector<bool> resident;
  for (int attempt = 0; attempt < 200; ++attempt) {  // The copy runs in the background.
    resident = ResidentPages(fd, want.size());
    ASSERT_FALSE(resident.empty()) << std::strerror(errno);
    if (std::all_of(resident.begin() + first_page, resident.begin() + end_page,
                    [](bool page) { return page; })) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(std::count(resident.begin() + first_page, resident.begin() + end_page, true),
            end_page - first_page)
      << "pages of the read's chunk in the page cache";
  const size_t far_page = 15 * kChunk / 4096;
  EXPECT_EQ(std::count(resident.begin() + far_page, resident.begin() + far_page + 256, true), 0)
      << "a single random read set off readahead";

  std::string chunk(kChunk, '\0');
  ASSERT_EQ(pread(fd, chunk.data(), kChunk, static_cast<off_t>(5 * kChunk)),
            static_cast<ssize_t>(kChunk));
  EXPECT_TRUE(chunk == want.substr(5 * kChunk, kChunk))
      << "the stored pages hold the source's bytes";
  close(fd);
}

// With no fill (the test servers' default), the cache holds what readers
// asked for: a lone read at the start of a large file (a header) fetches the
// checksum block around it, not its chunk, and sets off no readahead, nor
// does a read near it; a reader that goes on reading sequentially gets
// whole chunks and readahead; random reads cache their blocks.
class FuseFillNoneTest : public FuseReadTest {
 protected:
  // The bytes granaryd's store holds once the fetches in flight have been
  // given `settle` to land.
  double StoredBytes(std::chrono::milliseconds settle) {
    std::this_thread::sleep_for(settle);
    EXPECT_TRUE(server_->WaitForWriteBehind().ok());
    return server_->Metric("granary_store_used_bytes").value_or(-1);
  }
};

// A read's size, and the most a miss of part of a chunk fetches around a
// small read (granaryd holds such a chunk in part in 4 KiB blocks).
constexpr uint64_t kBlock = 64 << 10;

TEST_F(FuseFillNoneTest, AReadOfAFilesHeaderCachesItsBlockAndSetsOffNoReadahead) {
  const std::string want = ReadWhole(source_ + "/big2.bin");
  int fd = open((mounted_ + "/big2.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::string header(4096, '\0');
  ASSERT_EQ(pread(fd, header.data(), header.size(), 0), 4096);
  EXPECT_TRUE(header == want.substr(0, 4096));
  // Readahead, had it started, would have fetched the chunks after it by now.
  // The kernel may ask for a little more than the 4 KiB read (its own
  // readahead's first window), never a chunk.
  const double header_bytes = StoredBytes(std::chrono::milliseconds(1500));
  EXPECT_GE(header_bytes, 4096);
  EXPECT_LE(header_bytes, 2 * kBlock) << "a lone read at offset 0 cached more than its blocks";

  // A reader that goes on from there is sequential: the chunks ahead of it
  // are fetched before it asks.
  std::string rest(kChunk, '\0');
  ASSERT_EQ(pread(fd, rest.data(), rest.size(), 4096), static_cast<ssize_t>(kChunk));
  EXPECT_TRUE(rest == want.substr(4096, kChunk));
  EXPECT_GT(StoredBytes(std::chrono::milliseconds(1500)), 3 * kChunk)
      << "a sequential reader got no readahead";
  close(fd);
}

TEST_F(FuseFillNoneTest, AHeaderAndARecordNearItCacheTheirBlocksOnly) {
  const std::string want = ReadWhole(source_ + "/big3.bin");
  int fd = open((mounted_ + "/big3.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::string bytes(4096, '\0');
  ASSERT_EQ(pread(fd, bytes.data(), bytes.size(), 0), 4096);
  EXPECT_TRUE(bytes == want.substr(0, 4096));
  const uint64_t record_at = kChunk + kChunk / 2 + 1000;  // In the next chunk.
  ASSERT_EQ(pread(fd, bytes.data(), bytes.size(), static_cast<off_t>(record_at)), 4096);
  EXPECT_TRUE(bytes == want.substr(record_at, 4096));
  EXPECT_LE(StoredBytes(std::chrono::milliseconds(1500)), 4 * kBlock)
      << "a header and a record near it set off readahead or whole chunks";
  close(fd);
}

TEST_F(FuseFillNoneTest, ColdRandomReadsCacheTheirBlocksNotTheirChunks) {
  const std::string want = ReadWhole(source_ + "/big0.bin");
  int fd = open((mounted_ + "/big0.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::mt19937_64 rng(7);
  std::string bytes(kBlock, '\0');
  constexpr int kReads = 20;
  for (int i = 0; i < kReads; ++i) {
    const uint64_t at = rng() % (want.size() - bytes.size()) / 4096 * 4096;
    ASSERT_EQ(pread(fd, bytes.data(), bytes.size(), static_cast<off_t>(at)),
              static_cast<ssize_t>(bytes.size()));
    ASSERT_TRUE(bytes == want.substr(at, bytes.size())) << "at " << at;
  }
  // Each 64 KiB read covers at most two blocks (more only where the kernel's
  // readahead widened a read that looked sequential).
  const double stored = StoredBytes(std::chrono::milliseconds(1500));
  EXPECT_LE(stored, kReads * 3 * kBlock) << "random reads cached whole chunks";
  EXPECT_GE(stored, kReads * kBlock / 2);
  EXPECT_LE(*server_->Metric("granary_bytes_from_source_total"), kReads * 3 * kBlock)
      << "the source read whole chunks";
  close(fd);
}

TEST_F(FuseReadTest, ChunksTheLocalServerHoldsAreReadOutOfItsDataFilesNotOverGrpc) {
  const std::string name = "big2.bin";
  const std::string want = ReadWhole(source_ + "/" + name);
  ASSERT_TRUE(ReadWhole(mounted_ + "/" + name) == want);  // Misses: read through over gRPC.
  ASSERT_TRUE(mount_->Restart().ok());                    // No chunk in granary-fuse's memory.
  auto grpc_reads = server_->Metric("granary_read_latency_seconds_count");
  auto served = server_->Metric("granary_bytes_from_cache_total");
  ASSERT_TRUE(grpc_reads.ok() && served.ok()) << grpc_reads.status() << served.status();

  EXPECT_TRUE(ReadWhole(mounted_ + "/" + name) == want);
  EXPECT_EQ(*server_->Metric("granary_read_latency_seconds_count"), *grpc_reads)
      << "cached chunks crossed gRPC";
  // Each byte is read from the store once; a read the kernel sends far out of
  // order looks random and may have its chunk fetched whole besides.
  const double read_from_store = *server_->Metric("granary_bytes_from_cache_total") - *served;
  EXPECT_GE(read_from_store, want.size());
  EXPECT_LE(read_from_store, want.size() + 2 * kChunk);
}

// Whether user `nobody` can read `path` whole and finds `want` there (run in
// a child process that drops root).
bool NobodyReads(const std::string& path, const std::string& want) {
  pid_t child = fork();
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    _exit(ReadWhole(path) == want && !want.empty() ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

TEST_F(FuseReadTest, AllowOtherLetsOtherUsersReadAndOnlyWithIt) {
  if (geteuid() != 0) GTEST_SKIP() << "switching to user nobody needs root";
  const std::string want = ReadWhole(source_ + "/odd");  // Mode 0644.
  auto shared = FuseMount::Start(server_->socket_address(), {"-o", "allow_other"}, "ds");
  ASSERT_TRUE(shared.ok()) << shared.status();
  // Both mount points' parents let nobody through, so only the mounts differ.
  for (const std::string& mount : {mount_->path(), (*shared)->path()}) {
    ASSERT_EQ(chmod(std::filesystem::path(mount).parent_path().c_str(), 0755), 0) << mount;
  }
  EXPECT_FALSE(NobodyReads(mounted_ + "/odd", want)) << "the mount without allow_other";
  EXPECT_TRUE(NobodyReads((*shared)->path() + "/ds/odd", want)) << "the mount with allow_other";
}

TEST_F(FuseReadTest, WritesOfEveryKindFailWithErofs) {
  const std::string file = mounted_ + "/chunk_exact";
  auto expect_erofs = [](int result, const char* what) {
    EXPECT_EQ(result, -1) << what;
    EXPECT_EQ(errno, EROFS) << what << ": " << std::strerror(errno);
  };
  expect_erofs(open(file.c_str(), O_WRONLY), "open O_WRONLY");
  expect_erofs(open(file.c_str(), O_RDWR), "open O_RDWR");
  expect_erofs(open(file.c_str(), O_RDONLY | O_TRUNC), "open O_TRUNC");
  expect_erofs(open((mounted_ + "/new").c_str(), O_WRONLY | O_CREAT, 0644), "create");
  expect_erofs(mkdir((mounted_ + "/newdir").c_str(), 0755), "mkdir");
  expect_erofs(rmdir((mounted_ + "/samples").c_str()), "rmdir");
  expect_erofs(unlink(file.c_str()), "unlink");
  expect_erofs(rename(file.c_str(), (mounted_ + "/renamed").c_str()), "rename");
  expect_erofs(link(file.c_str(), (mounted_ + "/hardlink").c_str()), "link");
  expect_erofs(symlink("chunk_exact", (mounted_ + "/symlink").c_str()), "symlink");
  expect_erofs(truncate(file.c_str(), 0), "truncate");
  expect_erofs(chmod(file.c_str(), 0777), "chmod");
  expect_erofs(chown(file.c_str(), 1, 1), "chown");
  expect_erofs(utimes(file.c_str(), nullptr), "utimes");
  expect_erofs(setxattr(file.c_str(), "user.x", "1", 1, 0), "setxattr");
  expect_erofs(mknod((mounted_ + "/fifo").c_str(), S_IFIFO | 0644, 0), "mknod");
  expect_erofs(mkdir((mount_->path() + "/new_dataset").c_str(), 0755), "mkdir in the root");
  EXPECT_EQ(ReadWhole(file), ReadWhole(source_ + "/chunk_exact"));
}

TEST_F(FuseReadTest, ChangedSourceFileReadsAsEstale) {
  // Not read before, so nothing of it is cached anywhere.
  const std::string name = "/samples/s7";
  struct timeval times[2] = {{1000, 0}, {1000, 0}};
  ASSERT_EQ(utimes((source_ + name).c_str(), times), 0);
  int fd = open((mounted_ + name).c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  char byte;
  EXPECT_EQ(pread(fd, &byte, 1, 0), -1);
  EXPECT_EQ(errno, ESTALE) << std::strerror(errno);
  close(fd);
}

TEST_F(FuseReadTest, DatasetsAddedLaterAppearInTheRoot) {
  const std::string other = source_dir_.path() + "/other";
  WriteFile(other + "/hello.txt", "hello\n");
  ASSERT_TRUE(AddDataset(*server_, "later", other).ok());
  // The root is refreshed at most once a second.
  std::string text;
  for (int i = 0; i < 50 && text.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    text = ReadWhole(mount_->path() + "/later/hello.txt");
  }
  EXPECT_EQ(text, "hello\n");
  auto [code, listing] = Shell("ls '" + mount_->path() + "'");
  EXPECT_EQ(listing, "ds\nlater\n");
}

// The mount loads a dataset's manifest from its granaryd when the dataset is
// first opened: an open while the server restarts waits for it.
TEST_F(FuseReadTest, AFirstOpenOfADatasetWhileItsServerRestartsWaitsForIt) {
  const std::string other = source_dir_.path() + "/other";
  WriteFile(other + "/hello.txt", "hello\n");
  ASSERT_TRUE(AddDataset(*server_, "later", other).ok());
  // Listed in the root (refreshed once a second), not opened yet.
  std::string listing;
  for (int i = 0; i < 50 && listing != "ds\nlater\n"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    listing = Shell("ls '" + mount_->path() + "'").second;
  }
  ASSERT_EQ(listing, "ds\nlater\n");

  ASSERT_TRUE(server_->Kill().ok());
  // The server is restarted from this thread: a child dies with the thread
  // that started it.
  int fd = -1;
  int open_errno = 0;
  std::thread opener([&] {
    fd = open((mount_->path() + "/later/hello.txt").c_str(), O_RDONLY);
    open_errno = errno;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const absl::Status restarted = server_->Restart();
  opener.join();
  ASSERT_TRUE(restarted.ok()) << restarted;
  ASSERT_GE(fd, 0) << std::strerror(open_errno) << mount_->log();
  std::string got(16, '\0');
  ssize_t n = read(fd, got.data(), got.size());
  close(fd);
  ASSERT_EQ(n, 6) << std::strerror(errno);
  EXPECT_EQ(got.substr(0, 6), "hello\n");
}

TEST_F(FuseReadTest, ServerKilledMidReadThenRestarted) {
  const std::string name = "/big1.bin";
  const std::string want = ReadWhole(source_ + name);
  int fd = open((mounted_ + name).c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::string got(want.size(), '\0');
  size_t done = 0;
  constexpr size_t kStep = 256 << 10;
  while (done < want.size()) {
    if (done == 4 * kChunk) {
      ASSERT_TRUE(server_->Kill().ok());
    }
    ssize_t n =
        pread(fd, got.data() + done, std::min(kStep, want.size() - done), static_cast<off_t>(done));
    ASSERT_GT(n, 0) << "at " << done << ": " << std::strerror(errno);
    done += static_cast<size_t>(n);
  }
  close(fd);
  EXPECT_TRUE(got == want);
  // A file never touched before is read entirely while the server is dead.
  EXPECT_EQ(ReadWhole(mounted_ + "/big2.bin"), ReadWhole(source_ + "/big2.bin"));
  EXPECT_EQ(ReadWhole(mounted_ + "/samples/s1"), ReadWhole(source_ + "/samples/s1"));
  EXPECT_NE(mount_->log().find("reading sources directly"), std::string::npos) << mount_->log();
  struct stat st;
  EXPECT_EQ(stat(mounted_.c_str(), &st), 0);  // Not ENOTCONN.

  ASSERT_TRUE(server_->Restart().ok());
  bool back = false;
  for (int i = 10; i < 300 && !back; ++i) {
    const std::string sample = "/samples/s" + std::to_string(i);
    ASSERT_EQ(ReadWhole(mounted_ + sample), ReadWhole(source_ + sample));
    back = mount_->log().find("answers again") != std::string::npos;
    if (!back) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(back) << mount_->log();
}

TEST_F(FuseReadTest, AnUnreadableTokenFileFailsTheMountWithItsName) {
  const std::string missing = source_dir_.path() + "/no-such-token";
  auto mount = FuseMount::Start(server_->socket_address(), {"--token-file", missing}, "ds");
  ASSERT_FALSE(mount.ok());
  EXPECT_NE(mount.status().message().find("granary-fuse: "), std::string::npos) << mount.status();
  EXPECT_NE(mount.status().message().find(missing), std::string::npos) << mount.status();
}

TEST_F(FuseReadTest, AManifestBudgetOfNothingOrNoSizeFailsTheMountNamingIt) {
  for (const std::string budget : {"0", "lots"}) {
    auto mount = FuseMount::Start(server_->socket_address(), {"--manifest-memory", budget}, "ds");
    ASSERT_FALSE(mount.ok()) << budget;
    EXPECT_NE(mount.status().message().find(budget == "0" ? "--manifest-memory" : "lots"),
              std::string::npos)
        << mount.status();
  }
}

TEST_F(FuseReadTest, AColdOpenMemoryThatIsNoSizeFailsTheMountNamingIt) {
  auto mount = FuseMount::Start(server_->socket_address(), {"--cold-open-memory", "lots"}, "ds");
  ASSERT_FALSE(mount.ok());
  EXPECT_NE(mount.status().message().find("--cold-open-memory"), std::string::npos)
      << mount.status();
  EXPECT_NE(mount.status().message().find("lots"), std::string::npos) << mount.status();
}

TEST_F(FuseReadTest, PyTorchDataLoaderSamplesMatchSource) {
  auto [code, output] = Shell("/usr/bin/python3 '" GRANARY_FUSE_TEST_DIR "/dataloader_check.py' '" +
                              mounted_ + "/samples' '" + source_ + "/samples'");
  EXPECT_EQ(code, 0) << output;
  EXPECT_NE(output.find("ok 300"), std::string::npos) << output;
}

TEST_F(FuseReadTest, SigtermUnmountsCleanly) {
  ASSERT_EQ(kill(mount_->pid(), SIGTERM), 0);
  for (int i = 0; i < 200 && mount_->Running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(mount_->Running());
  auto [code, mounts] = Shell("grep -c ' " + mount_->path() + " ' /proc/self/mountinfo");
  EXPECT_EQ(mounts, "0\n");
}

TEST_F(FuseReadTest, FusermountUnmounts) {
  absl::StatusOr<int> exit_code = mount_->Unmount();
  ASSERT_TRUE(exit_code.ok()) << exit_code.status();
  EXPECT_EQ(*exit_code, 0) << mount_->log();
}

}  // namespace
}  // namespace granary::testing
