// Jobs' reads through a real granary-fuse mount over a real granaryd, made
// from inside real cgroups this test creates (a cgroup v2 directory named as
// Slurm names a job's, and a pod slice as Kubernetes' systemd driver names
// it), one of them as an unprivileged user: granary jobs (--json and the
// table) and granaryd's /metrics show each job with its own dataset only,
// its files, and bytes whose split by origin adds up to what it read; jobs
// beyond max_job_series are summed into "other", and a real Prometheus
// scraping granaryd sees a bounded number of series that keep the sums. A
// user other than root cannot report jobs' reads to granaryd.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "tests/fuse/mounted_tree.h"
#include "tests/jobs/job_cgroups.h"
#include "tests/jobs/prometheus_server.h"

namespace granary::testing {
namespace {

constexpr char kPodUid[] = "1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901";
constexpr char kPodSlice[] =
    "kubepods.slice/kubepods-besteffort.slice/"
    "kubepods-besteffort-pod1b2c3d4e_5f60_7182_93a4_b5c6d7e8f901.slice";

uint64_t SumOf(const nlohmann::json& by_origin) {
  uint64_t sum = 0;
  for (const auto& [origin, value] : by_origin.items()) sum += value.get<uint64_t>();
  return sum;
}

class JobReadsMountTest : public MountedTree {
 protected:
  void BuildTree() override {
    // Small files (an open may pass them through) and a file of several
    // chunks read through granary-fuse.
    for (int i = 0; i < 6; ++i)
      WriteFile(absl::StrCat(source_, "/", i, ".bin"), RandomBytes(200'000 + i, i));
    // Past what an open reads through whole (8 MiB).
    WriteFile(source_ + "/big.bin", RandomBytes(9 * kChunk + 5, 99));
    for (int i = 0; i < 3; ++i) {
      WriteFile(absl::StrCat(second_, "/", i, ".txt"), RandomBytes(150'000 + i, 50 + i));
    }
    for (const std::string& dir : {source_, second_}) {
      ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
      for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        ASSERT_EQ(::chmod(entry.path().c_str(), 0644), 0);
      }
    }
    ASSERT_EQ(::chmod(source_dir_.path().c_str(), 0755), 0);
    ASSERT_EQ(::chmod(second_dir_.path().c_str(), 0755), 0);
  }

  std::vector<std::string> MountArgs() const override {
    std::vector<std::string> args = MountedTree::MountArgs();
    args.insert(args.end(), {"-o", "allow_other"});
    return args;
  }
  std::vector<std::string> ServerArgs() const override { return {"--config", config_path_}; }
  virtual std::string ConfigText() const { return "socket_mode: \"0666\"\n"; }

  void SetUp() override {
    second_ = second_dir_.path() + "/text";
    config_path_ = config_dir_.path() + "/granaryd.yaml";
    std::ofstream(config_path_) << ConfigText();
    MountedTree::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_EQ(::chmod(std::filesystem::path(mount_->path()).parent_path().c_str(), 0755), 0);
    ASSERT_TRUE(AddDataset(*server_, "text", second_).ok());
    // The mount lists datasets added since within a second.
    for (int i = 0; i < 100 && !std::filesystem::exists(mount_->path() + "/text"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(std::filesystem::exists(mount_->path() + "/text"));
  }

  // The files of `dir` through the mount, space-separated, and their total size.
  std::pair<std::string, uint64_t> FilesOf(const std::string& source, const std::string& dataset) {
    std::vector<std::string> paths;
    uint64_t bytes = 0;
    for (const auto& entry : std::filesystem::directory_iterator(source)) {
      paths.push_back(
          absl::StrCat(mount_->path(), "/", dataset, "/", entry.path().filename().string()));
      bytes += entry.file_size();
    }
    return {absl::StrJoin(paths, " "), bytes};
  }

  nlohmann::json Jobs() {
    auto [code, output] = Shell(
        absl::StrCat(GRANARY_CLI_PATH, " --server ", server_->socket_address(), " jobs --json"));
    EXPECT_EQ(code, 0) << output;
    return code == 0 ? nlohmann::json::parse(output) : nlohmann::json();
  }

  static const nlohmann::json* Entry(const nlohmann::json& jobs, const std::string& job,
                                     const std::string& dataset) {
    for (const nlohmann::json& entry : jobs["jobs"]) {
      if (entry["job"] == job && entry["dataset"] == dataset) return &entry;
    }
    return nullptr;
  }

  // granary jobs --json once `job` has opened `files` files of `dataset`
  // (granary-fuse reports every second).
  nlohmann::json JobsOnceOpened(const std::string& job, const std::string& dataset,
                                uint64_t files) {
    nlohmann::json jobs;
    for (int i = 0; i < 100; ++i) {
      jobs = Jobs();
      const nlohmann::json* entry = Entry(jobs, job, dataset);
      if (entry != nullptr && (*entry)["files_opened"].get<uint64_t>() >= files) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return jobs;
  }

  TempDir second_dir_;
  TempDir config_dir_;
  std::string second_;
  std::string config_path_;
  TestCgroups cgroups_;
};

TEST_F(JobReadsMountTest, EachJobInItsCgroupSeesOnlyItsOwnReadsAndWhereTheyCameFrom) {
  if (!cgroups_.available()) GTEST_SKIP() << "no writable cgroup v2 hierarchy here";
  const std::string slurm_job = cgroups_.Make("job_4242/step_0");
  const std::string pod = cgroups_.Make(kPodSlice);
  auto [images, image_bytes] = FilesOf(source_, "ds");
  auto [texts, text_bytes] = FilesOf(second_, "text");

  auto [read_images, images_output] = RunInCgroup(slurm_job, 0, "cat " + images + " > /dev/null");
  ASSERT_EQ(read_images, 0) << images_output;
  auto [read_texts, texts_output] = RunInCgroup(pod, kNobody, "cat " + texts + " > /dev/null");
  ASSERT_EQ(read_texts, 0) << texts_output;
  auto [read_plain, plain_output] =
      RunInCgroup("", kNobody, absl::StrCat("cat ", mount_->path(), "/ds/0.bin > /dev/null"));
  ASSERT_EQ(read_plain, 0) << plain_output;

  const std::string pod_job = absl::StrCat("pod:", kPodUid);
  JobsOnceOpened("slurm:4242", "ds", 7);
  JobsOnceOpened(pod_job, "text", 3);
  const nlohmann::json jobs = JobsOnceOpened("uid:65534", "ds", 1);

  const nlohmann::json* slurm = Entry(jobs, "slurm:4242", "ds");
  ASSERT_NE(slurm, nullptr) << jobs.dump(2);
  EXPECT_EQ((*slurm)["files_opened"], 7);
  EXPECT_EQ((*slurm)["bytes_read"], image_bytes) << jobs.dump(2);
  EXPECT_EQ(SumOf((*slurm)["bytes"]), image_bytes);
  EXPECT_GT((*slurm)["bytes"]["source"].get<uint64_t>(), 0u)
      << "the files were cold: read through from the source" << jobs.dump(2);
  EXPECT_GT((*slurm)["wait_seconds"].get<double>(), 0);
  EXPECT_EQ((*slurm)["errors"], 0);

  const nlohmann::json* pod_entry = Entry(jobs, pod_job, "text");
  ASSERT_NE(pod_entry, nullptr) << jobs.dump(2);
  EXPECT_EQ((*pod_entry)["files_opened"], 3);
  EXPECT_EQ((*pod_entry)["bytes_read"], text_bytes) << jobs.dump(2);

  const nlohmann::json* plain = Entry(jobs, "uid:65534", "ds");
  ASSERT_NE(plain, nullptr) << jobs.dump(2);
  EXPECT_EQ((*plain)["files_opened"], 1);

  // Nobody sees another's reads.
  EXPECT_EQ(Entry(jobs, "slurm:4242", "text"), nullptr);
  EXPECT_EQ(Entry(jobs, pod_job, "ds"), nullptr);
  EXPECT_EQ(Entry(jobs, "uid:65534", "text"), nullptr);

  // The same figures on /metrics.
  absl::StatusOr<double> opened =
      server_->Metric("granary_job_files_opened_total{job_id=\"slurm:4242\",dataset=\"ds\"}");
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(*opened, 7);
  double bytes = 0;
  for (const char* origin : {"memory", "passthrough", "local", "peer", "source"}) {
    absl::StatusOr<double> from =
        server_->Metric(absl::StrCat("granary_job_read_bytes_total{job_id=\"", pod_job,
                                     "\",dataset=\"text\",origin=\"", origin, "\"}"));
    ASSERT_TRUE(from.ok()) << from.status();
    bytes += *from;
  }
  EXPECT_EQ(bytes, static_cast<double>(text_bytes));

  // And in the table.
  auto [code, table] =
      Shell(absl::StrCat(GRANARY_CLI_PATH, " --server ", server_->socket_address(), " jobs"));
  ASSERT_EQ(code, 0) << table;
  EXPECT_NE(table.find("slurm:4242"), std::string::npos) << table;
  EXPECT_NE(table.find(pod_job), std::string::npos) << table;
  EXPECT_NE(table.find("WAITED ON"), std::string::npos) << table;
}

TEST_F(JobReadsMountTest, AUserOtherThanRootCannotReportJobsReads) {
  const std::string socket_dir = std::filesystem::path(server_->socket_path()).parent_path();
  ASSERT_EQ(::chmod(socket_dir.c_str(), 0755), 0);
  auto [refused, output] = RunInCgroup(
      "", kNobody, absl::StrCat(GRANARY_FORGED_JOB_REPORT_PATH, " ", server_->socket_path()));
  EXPECT_EQ(refused, 0) << "nobody's report was not refused: " << output;
  EXPECT_EQ(Entry(Jobs(), "slurm:1", "ds"), nullptr);
}

TEST_F(JobReadsMountTest, ThePythonClientsBatchesCountForTheCallersJob) {
  if (!cgroups_.available()) GTEST_SKIP() << "no writable cgroup v2 hierarchy here";
  const std::string cgroup = cgroups_.Make("job_5151");
  const std::string read_batch = absl::StrCat(
      "env PYTHONPATH=", GRANARY_PYTHON_PATH, " /usr/bin/python3 -c \"import granary; ",
      "granary.Client(\\\"", server_->socket_path(),
      "\\\").read_many(\\\"text\\\", [\\\"0.txt\\\", \\\"1.txt\\\"])\"");
  auto [code, output] = RunInCgroup(cgroup, 0, read_batch);
  ASSERT_EQ(code, 0) << output;
  const nlohmann::json jobs = JobsOnceOpened("slurm:5151", "text", 2);
  const nlohmann::json* entry = Entry(jobs, "slurm:5151", "text");
  ASSERT_NE(entry, nullptr) << jobs.dump(2);
  EXPECT_EQ((*entry)["files_opened"], 2);
  EXPECT_EQ((*entry)["bytes_read"], 150'000u + 150'001u) << jobs.dump(2);
  // Never read before: granaryd fetched both from the source for this batch.
  EXPECT_EQ((*entry)["bytes"]["source"], 150'000u + 150'001u) << jobs.dump(2);
  EXPECT_GT((*entry)["wait_seconds"].get<double>(), 0);

  // Read again, the same files come from the node's store.
  auto [again, again_output] = RunInCgroup(cgroup, 0, read_batch);
  ASSERT_EQ(again, 0) << again_output;
  const nlohmann::json later = JobsOnceOpened("slurm:5151", "text", 4);
  const nlohmann::json* later_entry = Entry(later, "slurm:5151", "text");
  ASSERT_NE(later_entry, nullptr) << later.dump(2);
  EXPECT_EQ((*later_entry)["bytes"]["source"], 150'000u + 150'001u) << later.dump(2);
  EXPECT_EQ((*later_entry)["bytes"]["local"], 150'000u + 150'001u) << later.dump(2);
}

// A node that lists three jobs apart: the rest are summed into "other".
class BoundedJobSeriesTest : public JobReadsMountTest {
 protected:
  std::string ConfigText() const override { return "max_job_series: 3\n"; }
};

TEST_F(BoundedJobSeriesTest, JobsBeyondTheBoundAreSummedAndPrometheusSeesBoundedSeries) {
  if (!cgroups_.available()) GTEST_SKIP() << "no writable cgroup v2 hierarchy here";
  constexpr int kJobs = 8;
  for (int job = 1; job <= kJobs; ++job) {
    const std::string cgroup = cgroups_.Make(absl::StrCat("job_", job));
    auto [code, output] = RunInCgroup(
        cgroup, 0, absl::StrCat("cat ", mount_->path(), "/ds/", job % 6, ".bin > /dev/null"));
    ASSERT_EQ(code, 0) << output;
  }
  nlohmann::json jobs;
  uint64_t opened = 0;
  for (int i = 0; i < 100 && opened < kJobs; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    jobs = Jobs();
    opened = 0;
    for (const nlohmann::json& entry : jobs["jobs"])
      opened += entry["files_opened"].get<uint64_t>();
  }
  EXPECT_EQ(opened, static_cast<uint64_t>(kJobs)) << jobs.dump(2);
  EXPECT_LE(jobs["jobs"].size(), 4u) << jobs.dump(2);
  EXPECT_GE(jobs["folded_jobs"].get<uint64_t>(), static_cast<uint64_t>(kJobs - 3));
  EXPECT_EQ(jobs["jobs"].back()["job"], "other");

  // A real Prometheus scrapes granaryd every second.
  absl::StatusOr<std::unique_ptr<PrometheusServer>> prometheus =
      PrometheusServer::Start(server_->metrics_address());
  ASSERT_TRUE(prometheus.ok()) << prometheus.status();
  auto query = [&](const std::string& promql) { return (*prometheus)->Query(promql); };
  nlohmann::json total;
  for (int i = 0; i < 300; ++i) {
    total = query("sum(granary_job_files_opened_total)");
    if (total.is_array() && !total.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(total.is_array() && !total.empty())
      << "Prometheus never scraped granaryd: " << (*prometheus)->log();
  EXPECT_EQ(total[0]["value"][1], std::to_string(kJobs));
  const nlohmann::json series = query("count(granary_job_files_opened_total)");
  ASSERT_TRUE(series.is_array() && !series.empty());
  EXPECT_LE(std::stoi(series[0]["value"][1].get<std::string>()), 4);
  const nlohmann::json other = query("granary_job_files_opened_total{job_id=\"other\"}");
  ASSERT_TRUE(other.is_array() && other.size() == 1u) << other.dump();
  EXPECT_EQ(other[0]["metric"]["job"], "granary") << "Prometheus' own job label is untouched";
}

}  // namespace
}  // namespace granary::testing
