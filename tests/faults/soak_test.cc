// A bounded soak: 64 readers through a real mount for $GRANARY_SOAK_SECONDS
// (default 60), over a prewarmed dataset larger than granary-fuse's chunk
// cache, so that reads keep reaching granaryd. Zero errors and zero wrong
// bytes; the resident memory of granaryd and granary-fuse, sampled every
// second, stays flat after the first quarter (the warm-up); read latency
// percentiles are printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <numeric>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/faults/fault_fixture.h"

namespace granary::testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Resident memory sampled once a second.
struct MemoryTrace {
  std::vector<uint64_t> server, mount;
};

class SoakTest : public FaultTest {};

TEST_F(SoakTest, SixtyFourReadersNoErrorFlatMemory) {
  const int seconds = EnvInt("GRANARY_SOAK_SECONDS", 60);
  const int warm_up = std::max(seconds / 4, 5);
  // 256 MiB: 448 small samples and 16 shards of 8 MiB, against a 64 MiB
  // client cache.
  std::vector<SourceFile> files = WriteSourceTree(source_, "small/", 448, 256 << 10);
  for (SourceFile& shard : WriteSourceTree(source_, "shard/", 16, 8 * kMiB, 1000)) {
    files.push_back(std::move(shard));
  }
  StartServerAndRegister();
  if (HasFatalFailure()) return;
  EXPECT_EQ(PrewarmAll().failures_size(), 0);
  Mount({"--cache-size", "64MiB"});
  if (HasFatalFailure()) return;

  MemoryTrace trace;
  ReaderPool readers(mounted_, files, 64, /*seed=*/100);
  Clock::time_point start = Clock::now();
  for (int second = 1; second <= seconds; ++second) {
    std::this_thread::sleep_until(start + std::chrono::seconds(second));
    // A sample that cannot be read fails the test: a zero would pass the bound.
    absl::StatusOr<uint64_t> server_rss = ResidentBytes(server_->pid());
    absl::StatusOr<uint64_t> mount_rss = ResidentBytes(mount_->pid());
    ASSERT_TRUE(server_rss.ok()) << server_rss.status();
    ASSERT_TRUE(mount_rss.ok()) << mount_rss.status();
    trace.server.push_back(*server_rss);
    trace.mount.push_back(*mount_rss);
  }
  readers.Stop();
  const double elapsed = SecondsSince(start);

  ReadTally tally = readers.Tally();
  EXPECT_EQ(tally.errors, 0u) << tally.first_errors.front();
  EXPECT_EQ(tally.bytes_wrong, 0u);
  // Flat: after the warm-up, the mean of the last third of the samples is
  // within 10% + 8 MiB of the mean of the first third (single samples swing
  // with the chunk buffers of the reads in flight).
  std::string memory;
  for (auto [name, samples] :
       {std::pair{"granaryd", &trace.server}, std::pair{"granary-fuse", &trace.mount}}) {
    const std::vector<uint64_t> settled(samples->begin() + warm_up, samples->end());
    const size_t third = std::max<size_t>(settled.size() / 3, 1);
    const uint64_t early = std::accumulate(settled.begin(), settled.begin() + third, 0ull) / third;
    const uint64_t late = std::accumulate(settled.end() - third, settled.end(), 0ull) / third;
    EXPECT_LE(late, early + early / 10 + 8 * kMiB)
        << name << " grew from " << early / kMiB << " MiB to " << late / kMiB << " MiB";
    absl::StrAppendFormat(&memory, "%s%s RSS %d -> %d MiB (peak %d)", memory.empty() ? "" : "; ",
                          name, early / kMiB, late / kMiB,
                          *std::max_element(settled.begin(), settled.end()) / kMiB);
  }
  std::vector<double> latencies = readers.Latencies();
  const std::string percentiles = absl::StrFormat(
      "read latency p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms",
      1e3 * Quantile(latencies, 0.5), 1e3 * Quantile(latencies, 0.9),
      1e3 * Quantile(latencies, 0.99), 1e3 * Quantile(latencies, 0.999),
      1e3 * Quantile(latencies, 1.0));
  std::cout << absl::StrFormat("soak: %d readers, %.0f s, %d reads (%.0f/s), %.0f MiB/s; ", 64,
                               elapsed, latencies.size(), latencies.size() / elapsed,
                               tally.bytes_read / elapsed / kMiB)
            << percentiles << "; " << memory << std::endl;
  ReportFaultRow({absl::StrFormat("Soak: 64 readers through the mount for %d s", seconds), 1, tally,
                  absl::StrCat("no fault; ", percentiles, "; ", memory)});
}

}  // namespace
}  // namespace granary::testing
