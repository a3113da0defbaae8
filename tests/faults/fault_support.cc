#include "tests/faults/fault_support.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/status.h"

namespace granary::testing {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

constexpr uint64_t kMaxRangeBytes = 2 << 20;

}  // namespace

std::string ExpectedBytes(uint64_t seed, uint64_t offset, uint64_t length) {
  std::string bytes(length, '\0');
  uint64_t position = offset;
  while (position < offset + length) {
    const uint64_t word = SplitMix64(seed * 0x100000001B3ull ^ SplitMix64(position / 8));
    const uint64_t skip = position % 8;
    const uint64_t take = std::min(8 - skip, offset + length - position);
    std::memcpy(bytes.data() + (position - offset), reinterpret_cast<const char*>(&word) + skip,
                take);
    position += take;
  }
  return bytes;
}

std::vector<SourceFile> WriteSourceTree(const std::string& root, const std::string& prefix,
                                        int count, uint64_t size, uint64_t first_seed) {
  constexpr uint64_t kBlock = 4 << 20;
  std::vector<SourceFile> files;
  for (int i = 0; i < count; ++i) {
    SourceFile file{absl::StrCat(prefix, i), size, first_seed + i};
    std::filesystem::path path = std::filesystem::path(root) / file.path;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    for (uint64_t at = 0; at < size; at += kBlock) {
      std::string block = ExpectedBytes(file.seed, at, std::min(kBlock, size - at));
      out.write(block.data(), static_cast<std::streamsize>(block.size()));
    }
    files.push_back(std::move(file));
  }
  return files;
}

namespace {

// Reads [offset, offset + length) of `path` and checks it; adds to `tally`.
void ReadRange(const std::string& path, const SourceFile& file, uint64_t offset, uint64_t length,
               ReadTally* tally) {
  auto fail = [&](int error) {
    tally->errors++;
    if (tally->first_errors.size() < 10) {
      tally->first_errors.push_back(absl::StrCat(path, ": ", std::strerror(error)));
    }
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(errno);
  std::string got(length, '\0');
  uint64_t done = 0;
  while (done < length) {
    ssize_t n = ::pread(fd, got.data() + done, std::min<uint64_t>(1 << 20, length - done),
                        static_cast<off_t>(offset + done));
    if (n <= 0) {
      int error = n < 0 ? errno : EPIPE;  // EPIPE: the file ended early.
      ::close(fd);
      return fail(error);
    }
    done += static_cast<uint64_t>(n);
  }
  // The next read of this file goes to granary-fuse, not the page cache.
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  tally->bytes_read += length;
  TallyRead(got, ExpectedBytes(file.seed, offset, length), tally);
}

}  // namespace

void TallyRead(std::string_view got, std::string_view want, ReadTally* tally) {
  uint64_t wrong = got.size() > want.size() ? got.size() - want.size() : want.size() - got.size();
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) wrong += got[i] != want[i];
  tally->bytes_wrong += wrong;
  if (wrong == 0) tally->reads_verified++;
}

void ReadAndVerify(const std::string& path, const SourceFile& file, ReadTally* tally) {
  ReadRange(path, file, 0, file.size, tally);
}

ReaderPool::ReaderPool(std::string mount_root, std::vector<SourceFile> files, int threads,
                       uint64_t seed)
    : mount_root_(std::move(mount_root)), files_(std::move(files)) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this, seed, i] { Run(seed + i); });
}

ReaderPool::~ReaderPool() { Stop(); }

void ReaderPool::Stop() {
  stop_ = true;
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

ReadTally ReaderPool::Tally() {
  std::lock_guard lock(mu_);
  return tally_;
}

std::vector<double> ReaderPool::Latencies() {
  std::lock_guard lock(mu_);
  return latencies_;
}

void ReaderPool::Run(uint64_t seed) {
  std::mt19937_64 random(seed);
  while (!stop_) {
    const SourceFile& file = files_[random() % files_.size()];
    if (random() % 4 == 0 || file.size == 0) {
      ReadOne(file, 0, file.size);
    } else {
      uint64_t offset = random() % file.size;
      ReadOne(file, offset, 1 + random() % std::min(kMaxRangeBytes, file.size - offset));
    }
  }
}

void ReaderPool::ReadOne(const SourceFile& file, uint64_t offset, uint64_t length) {
  ReadTally one;
  Clock::time_point start = Clock::now();
  ReadRange(mount_root_ + "/" + file.path, file, offset, length, &one);
  double seconds = SecondsSince(start);
  reads_++;
  std::lock_guard lock(mu_);
  latencies_.push_back(seconds);
  tally_.reads_verified += one.reads_verified;
  tally_.errors += one.errors;
  tally_.bytes_wrong += one.bytes_wrong;
  tally_.bytes_read += one.bytes_read;
  for (std::string& error : one.first_errors) {
    if (tally_.first_errors.size() < 10) tally_.first_errors.push_back(std::move(error));
  }
}

double Quantile(std::vector<double>& values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(q * static_cast<double>(values.size() - 1))];
}

absl::StatusOr<uint64_t> ResidentBytes(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (!line.starts_with("VmRSS:")) continue;
    std::istringstream fields(line.substr(6));
    uint64_t kib = 0;
    fields >> kib;
    return kib << 10;
  }
  return absl::NotFoundError(absl::StrCat("no VmRSS for process ", pid));
}

int EnvInt(const char* name, int fallback) {
  const char* text = std::getenv(name);
  int value = 0;
  return text != nullptr && absl::SimpleAtoi(text, &value) ? value : fallback;
}

void ReportFaultRow(const FaultRow& row) {
  std::string line =
      absl::StrCat("| ", row.fault, " | ", row.rounds, " | ", row.tally.reads_verified, " | ",
                   row.tally.errors, " | ", row.tally.bytes_wrong, " | ", row.recovery, " |");
  std::cout << "fault table row: " << line << std::endl;
  if (const char* table = std::getenv("GRANARY_FAULTS_TABLE"); table != nullptr) {
    std::ofstream(table, std::ios::app) << line << "\n";
  }
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace granary::testing
