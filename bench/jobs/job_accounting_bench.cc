// What granary-fuse adds to each read to count it for its job: the origin
// scope, two clock reads, holding the open file's counters and their atomic
// adds (BM_CountRead), with
// the threads of one job's readers sharing one job's counters, against a
// 128 KiB copy, the least a FUSE read's reply costs (BM_CopyReply); and
// what an open adds: finding the opener's job (cached) and its counters
// (BM_CountOpen).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "common/jobs/job_identity.h"
#include "common/jobs/job_reads.h"
#include "common/jobs/read_origin.h"

namespace granary {
namespace {

JobLedger& Ledger() {
  static JobLedger* ledger = new JobLedger({.max_entries = 256});
  return *ledger;
}

void BM_CountRead(benchmark::State& state) {
  const std::shared_ptr<JobReadCounters> file_counters = Ledger().For("slurm:1", "images");
  for (auto _ : state) {
    const auto started = std::chrono::steady_clock::now();
    ReadOriginScope origins;
    const std::shared_ptr<JobReadCounters> counters = file_counters;
    NoteReadOrigin(ReadOrigin::kLocal);
    counters->Read(origins.slowest().value_or(ReadOrigin::kMemory), 128 << 10,
                   std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now() - started)
                       .count());
  }
}
BENCHMARK(BM_CountRead)->ThreadRange(1, 4)->UseRealTime();

void BM_CopyReply(benchmark::State& state) {
  std::vector<char> from(128 << 10, 'x');
  std::vector<char> to(128 << 10);
  for (auto _ : state) {
    std::memcpy(to.data(), from.data(), from.size());
    benchmark::DoNotOptimize(to.data());
  }
}
BENCHMARK(BM_CopyReply)->ThreadRange(1, 4)->UseRealTime();

void BM_CountOpen(benchmark::State& state) {
  JobIdentifier identifier;
  for (auto _ : state) {
    std::shared_ptr<JobReadCounters> counters =
        Ledger().For(identifier.JobOf(::getpid(), ::getuid()), "images");
    counters->Opened(0);
  }
}
BENCHMARK(BM_CountOpen)->UseRealTime();

}  // namespace
}  // namespace granary

BENCHMARK_MAIN();
