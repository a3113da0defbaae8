// The job accounting's parts on their own: which job a cgroup names (Slurm's
// v1 and v2 layouts, both Kubernetes cgroup drivers, else the uid), the
// per-process cache over a /proc laid out by the test, the ledger's figures,
// its bounds (folding the idle and the least recently active into "other",
// sums kept), reports of deltas merged elsewhere, the origin scope, and the
// Prometheus text drawn from a ledger.
#include "common/jobs/job_reads.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cache_server/status/job_metrics.h"
#include "common/jobs/job_identity.h"
#include "common/jobs/read_origin.h"

namespace granary {
namespace {

uint64_t BytesFrom(const v1::JobReads& reads, ReadOrigin origin) {
  const int index = static_cast<int>(origin);
  return index < reads.bytes_size() ? reads.bytes(index) : 0;
}

const v1::JobReads* Find(const JobLedger::Listing& listing, std::string_view job,
                         std::string_view dataset) {
  for (const v1::JobReads& reads : listing.jobs) {
    if (reads.job() == job && reads.dataset() == dataset) return &reads;
  }
  return nullptr;
}

TEST(JobOfCgroupsTest, FindsSlurmJobsInCgroupV1AndV2Paths) {
  EXPECT_EQ(JobOfCgroups("0::/system.slice/slurmstepd.scope/job_1234/step_0/user/task_0\n", 1000),
            "slurm:1234");
  EXPECT_EQ(JobOfCgroups("12:pids:/\n"
                         "4:freezer:/slurm/uid_1000/job_77/step_batch\n"
                         "3:memory:/slurm/uid_1000/job_77/step_batch\n0::/\n",
                         1000),
            "slurm:77");
  EXPECT_EQ(JobOfCgroups("0::/job_4242\n", 0), "slurm:4242");
}

TEST(JobOfCgroupsTest, FindsPodsOfBothKubernetesCgroupDrivers) {
  EXPECT_EQ(JobOfCgroups("0::/kubepods.slice/kubepods-besteffort.slice/"
                         "kubepods-besteffort-pod1b2c3d4e_5f60_7182_93a4_b5c6d7e8f901.slice/"
                         "cri-containerd-abc.scope\n",
                         1000),
            "pod:1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901");
  EXPECT_EQ(JobOfCgroups(
                "0::/kubepods.slice/kubepods-pod0a1b2c3d_0000_1111_2222_333344445555.slice\n", 0),
            "pod:0a1b2c3d-0000-1111-2222-333344445555");
  EXPECT_EQ(JobOfCgroups("5:memory:/kubepods/burstable/pod9f8e7d6c-1111-2222-3333-444455556666/"
                         "0123456789abcdef\n",
                         0),
            "pod:9f8e7d6c-1111-2222-3333-444455556666");
}

TEST(JobOfCgroupsTest, AnythingElseIsTheUid) {
  EXPECT_EQ(JobOfCgroups("0::/user.slice/user-1000.slice/session-3.scope\n", 1000), "uid:1000");
  EXPECT_EQ(JobOfCgroups("", 7), "uid:7");
  // Names that only look alike are no jobs.
  EXPECT_EQ(JobOfCgroups("0::/job_12x/podcast\n", 5), "uid:5");
  EXPECT_EQ(JobOfCgroups("0::/apps/pod1234-5678-9abc\n", 5), "uid:5");  // Not under kubepods.
  EXPECT_EQ(JobOfCgroups("garbage without colons\n0::/job_9\n", 5), "slurm:9");
}

TEST(JobIdentifierTest, ReadsEachProcessOnceAndUsesTheUidWhenItIsGone) {
  const std::string proc =
      std::filesystem::temp_directory_path() / absl::StrCat("granary-proc-", ::getpid());
  std::filesystem::create_directories(proc + "/321");
  std::ofstream(proc + "/321/cgroup") << "0::/job_55/step_0\n";
  JobIdentifier identifier(proc);
  EXPECT_EQ(identifier.JobOf(321, 1000), "slurm:55");
  // Remembered: a changed file is not read again within kRemembered.
  std::ofstream(proc + "/321/cgroup") << "0::/job_56/step_0\n";
  EXPECT_EQ(identifier.JobOf(321, 1000), "slurm:55");
  // Another uid for the same pid (reused) is looked up afresh.
  EXPECT_EQ(identifier.JobOf(321, 1001), "slurm:56");
  EXPECT_EQ(identifier.JobOf(999, 1002), "uid:1002");
  EXPECT_EQ(identifier.JobOf(0, 0), "uid:0");
  std::filesystem::remove_all(proc);
}

TEST(JobLedgerTest, CountsOpensBytesWaitsAndErrorsPerJobAndDataset) {
  JobLedger ledger({.max_entries = 8, .idle_after = std::chrono::minutes(1)});
  std::shared_ptr<JobReadCounters> a = ledger.For("slurm:1", "images");
  a->Opened(1000);
  a->Read(ReadOrigin::kSource, 4096, 2'000'000);
  a->Read(ReadOrigin::kLocal, 100, 50'000);
  a->Failed();
  ledger.For("slurm:2", "text")->Read(ReadOrigin::kPeer, 7, 10);
  EXPECT_EQ(ledger.For("slurm:1", "images"), a);

  JobLedger::Listing listing = ledger.Totals();
  ASSERT_EQ(listing.jobs.size(), 2u);
  EXPECT_EQ(listing.jobs[0].job(), "slurm:1") << "the most wait first";
  const v1::JobReads& one = listing.jobs[0];
  EXPECT_EQ(one.files_opened(), 1u);
  EXPECT_EQ(one.open_wait_ns(), 1000u);
  EXPECT_EQ(BytesFrom(one, ReadOrigin::kSource), 4096u);
  EXPECT_EQ(BytesFrom(one, ReadOrigin::kLocal), 100u);
  EXPECT_EQ(one.wait_ns(static_cast<int>(ReadOrigin::kSource)), 2'000'000u);
  EXPECT_EQ(one.errors(), 1u);
  // 2 ms lands in the (1 ms, 2.5 ms] bucket, 50 us in the first.
  ASSERT_EQ(one.wait_buckets_size(), static_cast<int>(JobReadCounters::kWaitBounds.size() + 1));
  EXPECT_EQ(one.wait_buckets(0), 1u);
  EXPECT_EQ(one.wait_buckets(4), 1u);
  EXPECT_GT(one.last_read_unix_ms(), 0);
  EXPECT_EQ(listing.folded_jobs, 0u);
}

TEST(JobLedgerTest, StaysBoundedByFoldingTheLeastRecentlyActiveAndKeepsTheSums) {
  JobLedger ledger({.max_entries = 4, .idle_after = std::chrono::minutes(1)});
  for (int job = 0; job < 10'000; ++job) {
    ledger.For(absl::StrCat("slurm:", job), "ds")->Read(ReadOrigin::kLocal, 10, 1);
    ASSERT_LE(ledger.entries(), 4u);
  }
  JobLedger::Listing listing = ledger.Totals();
  ASSERT_EQ(listing.jobs.size(), 5u) << "four jobs and other";
  EXPECT_EQ(listing.folded_jobs, 9996u);
  EXPECT_EQ(listing.jobs.back().job(), JobLedger::kOtherJob);
  uint64_t bytes = 0;
  for (const v1::JobReads& reads : listing.jobs) bytes += BytesFrom(reads, ReadOrigin::kLocal);
  EXPECT_EQ(bytes, 100'000u);
  EXPECT_NE(Find(listing, "slurm:9999", "ds"), nullptr) << "the latest job is listed apart";
}

TEST(JobLedgerTest, FoldsIdleJobsButNeverCountersAnOpenFileHolds) {
  JobLedger ledger({.max_entries = 8, .idle_after = std::chrono::milliseconds(20)});
  ledger.For("slurm:1", "ds")->Read(ReadOrigin::kSource, 5, 1);
  std::shared_ptr<JobReadCounters> held = ledger.For("slurm:2", "ds");
  held->Read(ReadOrigin::kSource, 6, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  JobLedger::Listing listing = ledger.Totals();
  EXPECT_EQ(Find(listing, "slurm:1", "ds"), nullptr);
  EXPECT_NE(Find(listing, "slurm:2", "ds"), nullptr);
  ASSERT_NE(Find(listing, JobLedger::kOtherJob, ""), nullptr);
  EXPECT_EQ(BytesFrom(*Find(listing, JobLedger::kOtherJob, ""), ReadOrigin::kSource), 5u);
  EXPECT_EQ(listing.folded_jobs, 1u);
}

TEST(JobLedgerTest, ReportsCarryWhatWasAddedSinceAndMergeIntoTotals) {
  JobLedger mount({.max_entries = 8, .idle_after = std::chrono::minutes(1)});
  JobLedger server({.max_entries = 8, .idle_after = std::chrono::minutes(1)});
  std::shared_ptr<JobReadCounters> counters = mount.For("pod:ab12cd34-0000", "ds");
  counters->Opened(10);
  counters->Read(ReadOrigin::kMemory, 300, 5);
  server.Merge(mount.TakeReport());
  EXPECT_EQ(mount.TakeReport().jobs_size(), 0) << "nothing new";
  counters->Read(ReadOrigin::kMemory, 200, 5);
  server.Merge(mount.TakeReport());

  JobLedger::Listing listing = server.Totals();
  const v1::JobReads* merged = Find(listing, "pod:ab12cd34-0000", "ds");
  ASSERT_NE(merged, nullptr);
  EXPECT_EQ(merged->files_opened(), 1u);
  EXPECT_EQ(BytesFrom(*merged, ReadOrigin::kMemory), 500u);
  EXPECT_EQ(merged->wait_buckets(0), 2u);
}

TEST(ReadOriginScopeTest, KeepsTheSlowestOriginNotedOnItsThreadOnly) {
  NoteReadOrigin(ReadOrigin::kSource);  // No scope: dropped.
  ReadOriginScope scope;
  EXPECT_FALSE(scope.slowest().has_value());
  NoteReadOrigin(ReadOrigin::kLocal);
  NoteReadOrigin(ReadOrigin::kPeer);
  NoteReadOrigin(ReadOrigin::kMemory);
  std::thread([] { NoteReadOrigin(ReadOrigin::kSource); }).join();
  EXPECT_EQ(scope.slowest(), ReadOrigin::kPeer);
  {
    ReadOriginScope inner;
    NoteReadOrigin(ReadOrigin::kSource);
    EXPECT_EQ(inner.slowest(), ReadOrigin::kSource);
  }
  EXPECT_EQ(scope.slowest(), ReadOrigin::kPeer);
}

TEST(JobMetricsTest, RendersOneSeriesPerJobDatasetAndOriginWithTheHistogram) {
  JobLedger ledger({.max_entries = 8, .idle_after = std::chrono::minutes(1)});
  std::shared_ptr<JobReadCounters> counters = ledger.For("slurm:7", "we\"ird");
  counters->Opened(0);
  counters->Read(ReadOrigin::kSource, 1000, 3'000'000);
  std::string text;
  RenderJobMetrics(ledger.Totals(), &text);
  const std::string labels = "job_id=\"slurm:7\",dataset=\"we\\\"ird\"";
  EXPECT_NE(text.find(absl::StrCat("granary_job_files_opened_total{", labels, "} 1\n")),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(absl::StrCat("granary_job_read_bytes_total{", labels,
                                   ",origin=\"source\"} 1000\n")),
            std::string::npos);
  EXPECT_NE(text.find(absl::StrCat("granary_job_wait_seconds_total{", labels,
                                   ",origin=\"source\"} 0.003\n")),
            std::string::npos);
  EXPECT_NE(text.find(absl::StrCat("granary_job_read_wait_seconds_bucket{", labels,
                                   ",le=\"0.0025\"} 0\n")),
            std::string::npos);
  EXPECT_NE(text.find(absl::StrCat("granary_job_read_wait_seconds_bucket{", labels,
                                   ",le=\"0.005\"} 1\n")),
            std::string::npos);
  EXPECT_NE(text.find(absl::StrCat("granary_job_read_wait_seconds_count{", labels, "} 1\n")),
            std::string::npos);
  EXPECT_NE(text.find("granary_jobs_tracked 1\n"), std::string::npos);
}

}  // namespace
}  // namespace granary
