// Shared machinery of the fault suite (tests/faults): source trees whose every
// byte can be recomputed from its position, readers that check every byte
// they read through a real mount, latency percentiles, resident memory of a
// process, and the report rows behind the table in tests/faults/README.md.
//
// Thread-safety: ReaderPool runs its own threads and its counters may be read
// while they run; everything else is for one test thread.
#ifndef GRANARY_TESTS_FAULTS_FAULT_SUPPORT_H_
#define GRANARY_TESTS_FAULTS_FAULT_SUPPORT_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace granary::testing {

// Bytes [offset, offset + length) of the file with `seed`: every 8-byte word is
// a hash of the seed and the word's index, so any range can be recomputed
// without reading (and wrong bytes cannot pass for right ones).
std::string ExpectedBytes(uint64_t seed, uint64_t offset, uint64_t length);

// One file of a source tree; its content is ExpectedBytes(seed, 0, size).
struct SourceFile {
  std::string path;  // Relative to the tree's root.
  uint64_t size = 0;
  uint64_t seed = 0;
};

// Writes `count` files of `size` bytes named "<prefix><index>" under `root`
// (created if missing), seeds first_seed, first_seed + 1, ...
std::vector<SourceFile> WriteSourceTree(const std::string& root, const std::string& prefix,
                                        int count, uint64_t size, uint64_t first_seed = 1);

// What readers saw.
struct ReadTally {
  uint64_t reads_verified = 0;  // Reads whose every byte matched.
  uint64_t errors = 0;          // Failed opens and reads.
  uint64_t bytes_wrong = 0;     // Bytes that did not match the source.
  uint64_t bytes_read = 0;
  std::vector<std::string> first_errors;  // "path: strerror", at most 10.
};

// `threads` readers of `files` under `mount_root`, until Stop(): each picks a
// file at random and reads it whole (one read in four) or a random range,
// checks every byte, and drops the file's pages from the kernel's cache so
// that the next read reaches granary-fuse again. Each read (open, reads,
// close) is timed.
class ReaderPool {
 public:
  ReaderPool(std::string mount_root, std::vector<SourceFile> files, int threads, uint64_t seed);
  ~ReaderPool();
  ReaderPool(const ReaderPool&) = delete;
  ReaderPool& operator=(const ReaderPool&) = delete;

  // Stops and joins the readers (idempotent).
  void Stop();
  ReadTally Tally();
  uint64_t reads() const { return reads_.load(); }
  // Latencies of every read so far, in seconds.
  std::vector<double> Latencies();

 private:
  void Run(uint64_t seed);
  void ReadOne(const SourceFile& file, uint64_t offset, uint64_t length);

  const std::string mount_root_;
  const std::vector<SourceFile> files_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> reads_{0};
  std::mutex mu_;
  ReadTally tally_;
  std::vector<double> latencies_;
  std::vector<std::thread> threads_;
};

// Adds a read that returned `got` where `want` was expected to `tally`:
// verified if equal, else its differing bytes (and any length difference)
// count as wrong.
void TallyRead(std::string_view got, std::string_view want, ReadTally* tally);

// Reads `path` through the mount whole and checks it against `file`; adds to
// `tally`.
void ReadAndVerify(const std::string& path, const SourceFile& file, ReadTally* tally);

// The q-quantile (0..1) of `values` (sorted in place).
double Quantile(std::vector<double>& values, double q);

// VmRSS of process `pid`, in bytes.
absl::StatusOr<uint64_t> ResidentBytes(pid_t pid);

// An integer from the environment, or `fallback` when unset or not a number.
int EnvInt(const char* name, int fallback);

// One row of the fault table: printed, and appended to $GRANARY_FAULTS_TABLE
// when set (tests/faults/README.md shows how the table is made).
struct FaultRow {
  std::string fault;
  int rounds = 0;
  ReadTally tally;
  std::string recovery;  // How long until reads were served normally again.
};
void ReportFaultRow(const FaultRow& row);

using Clock = std::chrono::steady_clock;
double SecondsSince(Clock::time_point start);

}  // namespace granary::testing

#endif  // GRANARY_TESTS_FAULTS_FAULT_SUPPORT_H_
