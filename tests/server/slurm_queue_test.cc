// SlurmQueue's parsing of scontrol's one-line records (as Slurm 22.05 prints
// them) and RunCommand's deadline and errors.
#include "cache_server/staging/slurm_queue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>

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

TEST(SlurmQueueTest, ParsesPendingRunningAndEndedJobs) {
  const auto jobs = ParseSlurmJobs(
      "JobId=3 JobName=b.sh UserId=nobody(65534) JobState=PENDING Reason=Resources "
      "StartTime=2026-12-07T11:05:00 EndTime=2026-12-07T11:06:00 Partition=debug "
      "NodeList=(null) SchedNodeList=gpu[01-02] NumNodes=2\n"
      "JobId=2 JobName=a.sh JobState=RUNNING StartTime=2026-12-07T11:00:00 Partition=debug "
      "NodeList=gpu03\n"
      "JobId=4 JobName=x JobState=PENDING StartTime=Unknown Partition=a,b NodeList=(null)\n"
      "JobId=1 JobState=CANCELLED Partition=debug NodeList=(null)\n"
      "\n");
  ASSERT_EQ(jobs.size(), 4u);
  const SlurmJob& pending = jobs.at("3");
  EXPECT_EQ(pending.phase, SlurmJob::Phase::kPending);
  EXPECT_EQ(pending.planned, "gpu[01-02]");
  EXPECT_EQ(pending.allocated, "");
  EXPECT_EQ(pending.partition, "debug");
  EXPECT_EQ(pending.start_unix_s, Local(2026, 12, 7, 11, 5, 0));
  EXPECT_EQ(jobs.at("2").phase, SlurmJob::Phase::kRunning);
  EXPECT_EQ(jobs.at("2").allocated, "gpu03");
  EXPECT_EQ(jobs.at("4").start_unix_s, 0);
  EXPECT_EQ(jobs.at("4").planned, "");
  EXPECT_EQ(jobs.at("4").partition, "a,b");
  EXPECT_EQ(jobs.at("1").phase, SlurmJob::Phase::kEnded);
}

TEST(SlurmQueueTest, FirstOccurrenceOfAKeyCountsAndOtherLinesAreSkipped) {
  const auto jobs = ParseSlurmJobs(
      "No jobs in the system\n"
      "JobId=5 JobState=PENDING Partition=debug SchedNodeList=n1 Comment=x SchedNodeList=n9\n");
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs.at("5").planned, "n1");
}

TEST(SlurmQueueTest, ParsesPartitions) {
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
