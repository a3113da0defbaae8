// SlurmQueue's parsing of scontrol's one-line records (captured from Slurm
// 22.05, testdata/) and RunCommand's deadline and errors.
#include "cache_server/staging/slurm_queue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

// "2026-12-07T11:05:00" as scontrol prints local times.
int64_t Local(int year, int month, int day, int hour, int minute, int second) {
  std::tm parts{};
  parts.tm_year = year - 1900;
  parts.tm_mon = month - 1;
  parts.tm_mday = day;
  parts.tm_hour = hour;
  parts.tm_min = minute;
  parts.tm_sec = second;
  parts.tm_isdst = -1;
  return static_cast<int64_t>(std::mktime(&parts));
}

// What `scontrol show job -o --all` printed on a test cluster (slurm-wlm
// 22.05.8, tests/scheduler_hooks/slurm_test_lib.sh, jobs submitted as nobody
// from a directory "my dir=x"):
//   sbatch -c 2 --time=2 -J 'a' './run me.sh'
//   sbatch -c 2 --time=1 -J 'name with JobState=RUNNING Partition=x'
//     --comment='note SchedNodeList=bogus StartTime=2020-01-01T00:00:00 x=y' './run me.sh'
//   sbatch -c 1 --time=1 -J 'N=1' --array=1-2 './run me.sh'
//   sbatch -c 1 --time=1 -J 'held' --hold './run me.sh'
// 8 s after submission (_1: job 1 runs, the others pend, 2 and 3 planned by
// the backfill scheduler), 33 s after (_2: job 1 completed, job 2 runs) and
// once all were cancelled (_3); and `scontrol show partition -o --all`.
std::string Captured(const std::string& name) {
  std::ifstream file(absl::StrCat(GRANARY_SERVER_TESTDATA, "/", name));
  EXPECT_TRUE(file.good()) << name;
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(SlurmQueueTest, ParsesPendingJobsWhoseNameAndCommentLookLikeFields) {
  const auto jobs = ParseSlurmJobs(Captured("scontrol_show_job_1.txt"));
  ASSERT_EQ(jobs.size(), 4u);
  const SlurmJob& running = jobs.at("1");
  EXPECT_EQ(running.phase, SlurmJob::Phase::kRunning);
  EXPECT_EQ(running.allocated, "localhost");
  EXPECT_EQ(running.start_unix_s, Local(2026, 12, 7, 13, 34, 56));
  // Its name says JobState=RUNNING Partition=x, its comment
  // SchedNodeList=bogus and a StartTime: none of them counts.
  const SlurmJob& named = jobs.at("2");
  EXPECT_EQ(named.state, "PENDING");
  EXPECT_EQ(named.phase, SlurmJob::Phase::kPending);
  EXPECT_EQ(named.partition, "debug");
  EXPECT_EQ(named.planned, "localhost");
  EXPECT_EQ(named.allocated, "");
  EXPECT_EQ(named.start_unix_s, Local(2026, 12, 7, 13, 36, 56));
  // An array job (keys before JobName), named with an '='.
  const SlurmJob& array = jobs.at("3");
  EXPECT_EQ(array.phase, SlurmJob::Phase::kPending);
  EXPECT_EQ(array.planned, "localhost");
  EXPECT_EQ(array.start_unix_s, Local(2026, 12, 7, 13, 38, 0));
  const SlurmJob& held = jobs.at("4");
  EXPECT_EQ(held.phase, SlurmJob::Phase::kPending);
  EXPECT_EQ(held.planned, "");
  EXPECT_EQ(held.start_unix_s, 0);
}

TEST(SlurmQueueTest, ParsesRunningAndEndedJobs) {
  const auto later = ParseSlurmJobs(Captured("scontrol_show_job_2.txt"));
  ASSERT_EQ(later.size(), 4u);
  EXPECT_EQ(later.at("1").phase, SlurmJob::Phase::kEnded);
  EXPECT_EQ(later.at("1").state, "COMPLETED");
  // Running now, with the comment's SchedNodeList still not counted.
  EXPECT_EQ(later.at("2").phase, SlurmJob::Phase::kRunning);
  EXPECT_EQ(later.at("2").allocated, "localhost");
  EXPECT_EQ(later.at("2").planned, "");
  EXPECT_EQ(later.at("2").start_unix_s, Local(2026, 12, 7, 13, 35, 28));

  const auto ended = ParseSlurmJobs(Captured("scontrol_show_job_3.txt"));
  ASSERT_EQ(ended.size(), 4u);
  for (const auto& [id, job] : ended) {
    EXPECT_EQ(job.phase, SlurmJob::Phase::kEnded) << id << ": " << job.state;
  }
}

// Job 4's line of scontrol_show_job_1.txt with `edits` (from, to) made.
std::string HeldJobLine(const std::vector<std::pair<std::string, std::string>>& edits) {
  const std::string captured = Captured("scontrol_show_job_1.txt");
  const size_t start = captured.find("JobId=4 ");
  std::string line = captured.substr(start, captured.find('\n', start) - start);
  for (const auto& [from, to] : edits) {
    const size_t at = line.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) line.replace(at, from.size(), to);
  }
  return line + "\n";
}

TEST(SlurmQueueTest, KeysCountOnlyWhereSlurmPrintsThem) {
  const auto jobs = ParseSlurmJobs(
      "No jobs in the system\n" +
      // What follows a newline inside a name opens no job.
      HeldJobLine({{"JobId=4", "x JobId=9"}}) +
      // Keys inside the name, a key Slurm 22.05 does not print, keys again
      // after their place and a comment naming a job.
      HeldJobLine({{"JobName=held", "JobName=a UserId=x GroupId=y JobState=RUNNING b"},
                   {"StartTime=Unknown", "Future=1 2 StartTime=Unknown"},
                   {"NodeList= ", "NodeList= SchedNodeList=n1 Partition=p2 SchedNodeList=n9 "},
                   {"Power=", "Comment=JobId=7 JobState=RUNNING Power="}}) +
      // A second line of job 4.
      HeldJobLine({{"JobState=PENDING", "JobState=RUNNING"}}) +
      // No JobState to be read.
      HeldJobLine({{"JobId=4", "JobId=8"}, {"JobState=PENDING", "JobStatus=PENDING"}}));
  ASSERT_EQ(jobs.size(), 1u);
  const SlurmJob& job = jobs.at("4");
  EXPECT_EQ(job.state, "PENDING");
  EXPECT_EQ(job.partition, "debug");
  EXPECT_EQ(job.planned, "n1");
  EXPECT_EQ(job.start_unix_s, 0);
}

TEST(SlurmQueueTest, ParsesPartitions) {
  const auto captured = ParseSlurmPartitions(Captured("scontrol_show_partition.txt"));
  ASSERT_EQ(captured.size(), 1u);
  EXPECT_EQ(captured.at("debug"), "localhost");
  const auto partitions = ParseSlurmPartitions(
      "PartitionName=debug AllowGroups=ALL Nodes=localhost,gpu[1-4] State=UP\n"
      "PartitionName=empty Nodes=(null)\n");
  ASSERT_EQ(partitions.size(), 2u);
  EXPECT_EQ(partitions.at("debug"), "localhost,gpu[1-4]");
  EXPECT_EQ(partitions.at("empty"), "");
}

TEST(SlurmQueueTest, RunCommandReturnsOutputOrNamesTheFailure) {
  auto output = RunCommand({"sh", "-c", "echo out; echo err >&2"}, std::chrono::seconds(10));
  ASSERT_TRUE(output.ok()) << output.status();
  EXPECT_EQ(*output, "out\nerr\n");

  auto failed = RunCommand({"sh", "-c", "echo broken; exit 3"}, std::chrono::seconds(10));
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(failed.status().message(), HasSubstr("broken"));

  auto missing = RunCommand({"/nonexistent/scontrol", "show", "job"}, std::chrono::seconds(10));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/scontrol"));

  const auto start = std::chrono::steady_clock::now();
  auto slow = RunCommand({"sleep", "10"}, std::chrono::milliseconds(200));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_THAT(slow.status().message(), HasSubstr("did not finish in 200 ms"));
}

}  // namespace
}  // namespace granary
