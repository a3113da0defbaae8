// What a job read per dataset version, on its own: the ledger keeps each
// version apart and lists their sum per job and dataset, stays bounded
// whatever the number of versions, hands a job's versions over at its end
// (TakeJob) and forgets them; reports carry versions and readers across; and
// JobReceipts keeps the most recent receipts, adds figures reported after a
// job's end (also when it read nothing before), and refuses job names that
// are not names.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache_server/status/job_receipts.h"
#include "common/jobs/job_reads.h"
#include "common/jobs/read_origin.h"

namespace granary {
namespace {

constexpr JobLedger::Limits kRoomy{.max_entries = 16, .idle_after = std::chrono::minutes(1)};

uint64_t LocalBytes(const v1::JobReads& reads) {
  const int index = static_cast<int>(ReadOrigin::kLocal);
  return index < reads.bytes_size() ? reads.bytes(index) : 0;
}

TEST(JobVersionsTest, EachVersionIsKeptApartAndListedSummed) {
  JobLedger ledger(kRoomy);
  ledger.For("slurm:1", "ds", 0xa, 1000)->Read(ReadOrigin::kLocal, 10, 1);
  ledger.For("slurm:1", "ds", 0xb, 1000)->Read(ReadOrigin::kLocal, 20, 1);
  ledger.For("slurm:1", "ds", 0xb, 1001)->Opened(1);
  EXPECT_EQ(ledger.entries(), 2u);

  JobLedger::Listing listing = ledger.Totals();
  ASSERT_EQ(listing.jobs.size(), 1u);
  EXPECT_EQ(LocalBytes(listing.jobs[0]), 30u);
  EXPECT_EQ(listing.jobs[0].version(), 0u) << "a listing sums versions";

  std::vector<v1::JobReads> taken = ledger.TakeJob("slurm:1");
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0].version(), 0xau);
  EXPECT_EQ(LocalBytes(taken[0]), 10u);
  EXPECT_EQ(taken[1].version(), 0xbu);
  EXPECT_EQ(LocalBytes(taken[1]), 20u);
  EXPECT_EQ(taken[1].files_opened(), 1u);
  EXPECT_EQ(std::vector<uint32_t>(taken[1].reader_uids().begin(), taken[1].reader_uids().end()),
            (std::vector<uint32_t>{1000, 1001}));
  EXPECT_GT(taken[0].first_read_unix_ms(), 0);
  EXPECT_EQ(ledger.entries(), 0u) << "an ended job is forgotten";
  EXPECT_TRUE(ledger.TakeJob("slurm:1").empty());
}

TEST(JobVersionsTest, TakingAJobLeavesTheOthersAndKeepsCountersAnOpenFileHolds) {
  JobLedger ledger(kRoomy);
  std::shared_ptr<JobReadCounters> held = ledger.For("slurm:1", "ds", 1);
  held->Read(ReadOrigin::kLocal, 5, 1);
  ledger.For("slurm:2", "ds", 1)->Read(ReadOrigin::kLocal, 7, 1);
  ASSERT_EQ(ledger.TakeJob("slurm:1").size(), 1u);
  EXPECT_EQ(ledger.entries(), 2u) << "the open file's counters stay, zeroed";
  held->Read(ReadOrigin::kLocal, 3, 1);
  std::vector<v1::JobReads> later = ledger.TakeJob("slurm:1");
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(LocalBytes(later[0]), 3u) << "only what was read since";
  EXPECT_EQ(LocalBytes(ledger.Totals().jobs.at(0)), 7u);
}

TEST(JobVersionsTest, TheLedgerStaysBoundedWhateverTheNumberOfVersions) {
  JobLedger ledger({.max_entries = 4, .idle_after = std::chrono::minutes(1)});
  for (int job = 0; job < 1'000; ++job) {
    for (uint64_t version = 1; version <= 5; ++version) {
      ledger.For(absl::StrCat("slurm:", job), "ds", version)->Read(ReadOrigin::kLocal, 1, 1);
      ASSERT_LE(ledger.entries(), 4u);
    }
  }
  JobLedger::Listing listing = ledger.Totals();
  uint64_t bytes = 0;
  for (const v1::JobReads& reads : listing.jobs) bytes += LocalBytes(reads);
  EXPECT_EQ(bytes, 5'000u) << "folded figures are kept in 'other'";
  EXPECT_EQ(listing.folded_jobs, 4'996u);
}

TEST(JobVersionsTest, ReportsCarryVersionsAndReadersToAnotherLedger) {
  JobLedger mount(kRoomy);
  JobLedger node(kRoomy);
  mount.For("pod:0123abcd", "ds", 7, 42)->Read(ReadOrigin::kSource, 9, 1);
  node.Merge(mount.TakeReport());
  std::vector<v1::JobReads> taken = node.TakeJob("pod:0123abcd");
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].version(), 7u);
  ASSERT_EQ(taken[0].reader_uids_size(), 1);
  EXPECT_EQ(taken[0].reader_uids(0), 42u);
}

v1::JobReads ReadOf(const std::string& job, uint64_t version, uint64_t bytes) {
  JobLedger ledger(kRoomy);
  ledger.For(job, "ds", version, 1000)->Read(ReadOrigin::kLocal, bytes, 1);
  v1::JobReads reads = ledger.TakeJob(job).at(0);
  reads.set_job(job);
  return reads;
}

TEST(JobReceiptsTest, KeepsTheMostRecentAndAddsWhatEndedJobsReadLater) {
  absl::StatusOr<std::unique_ptr<JobReceipts>> receipts =
      JobReceipts::Open({.node_id = "n1", .group = "g", .directory = "", .max_kept = 2});
  ASSERT_TRUE(receipts.ok()) << receipts.status();
  for (int job = 1; job <= 3; ++job) {
    const std::string name = absl::StrCat("slurm:", job);
    absl::StatusOr<JobReceipts::Ended> ended = (*receipts)->End(name, 0, {ReadOf(name, 1, 10)});
    ASSERT_TRUE(ended.ok()) << ended.status();
    EXPECT_TRUE(ended->path.empty()) << "no directory, no file";
  }
  absl::StatusOr<v1::JobReceipt> oldest = (*receipts)->Get("slurm:1");
  EXPECT_EQ(oldest.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(oldest.status().message().find("no receipt of job 'slurm:1'"), std::string::npos)
      << oldest.status();

  EXPECT_FALSE((*receipts)->AddLate(ReadOf("slurm:9", 1, 5))) << "slurm:9 has not ended";
  EXPECT_TRUE((*receipts)->AddLate(ReadOf("slurm:3", 1, 5)));
  EXPECT_TRUE((*receipts)->AddLate(ReadOf("slurm:3", 2, 6)));
  absl::StatusOr<v1::JobReceipt> latest = (*receipts)->Get("slurm:3");
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->node_id(), "n1");
  ASSERT_EQ(latest->reads_size(), 2);
  EXPECT_EQ(LocalBytes(latest->reads(0)), 15u);
  EXPECT_EQ(LocalBytes(latest->reads(1)), 6u);
  EXPECT_EQ(latest->reads(1).version(), 2u);
  EXPECT_GT(latest->started_unix_ms(), 0);

  absl::StatusOr<JobReceipts::Ended> bad = (*receipts)->End("slurm:../x", 0, {});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<JobReceipts::Ended> idle = (*receipts)->End("uid:5", 0, {});
  ASSERT_TRUE(idle.ok()) << idle.status();
  EXPECT_EQ(idle->receipt.reads_size(), 0);
  EXPECT_EQ((*receipts)->Get("uid:5").status().code(), absl::StatusCode::kNotFound);
  // Its reads reported after its end make its receipt.
  EXPECT_TRUE((*receipts)->AddLate(ReadOf("uid:5", 4, 8)));
  absl::StatusOr<v1::JobReceipt> late = (*receipts)->Get("uid:5");
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(LocalBytes(late->reads(0)), 8u);
  EXPECT_GT(late->started_unix_ms(), 0) << "the start is its first read";
}

}  // namespace
}  // namespace granary
