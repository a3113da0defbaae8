// Many short-lived jobs through a real granary-fuse mount over a real
// granaryd: each job is a process in a cgroup v2 directory of its own,
// `job_<n>` as Slurm names a job's, that opens and reads one file of the
// mount whole and exits; its cgroup is removed after it. Across the jobs,
// granaryd's and granary-fuse's resident memory stays within
// kRssGrowthBound of what it was before the first job, their open
// descriptors within kDescriptorGrowthBound, and a real Prometheus scraping
// granaryd every second never sees more than max_job_series + 1 series of a
// job metric, while their sum counts every open.
//
// $GRANARY_JOBS sets the number of jobs (1,000 by default; the benchmark in
// bench/RESULTS.md runs 10,000). The figures are printed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "tests/faults/fault_support.h"
#include "tests/fuse/mounted_tree.h"
#include "tests/jobs/job_cgroups.h"
#include "tests/jobs/prometheus_server.h"
#include "tests/server/server_test_util.h"

namespace granary::testing {
namespace {

constexpr int kFiles = 50;
constexpr int kMaxJobSeries = 64;
constexpr uint64_t kMiB = 1 << 20;
// What the jobs may add to each daemon's resident memory, whatever their
// number: granary-fuse remembers at most JobIdentifier::kMaxProcesses
// processes and ReadingJobs::kLimits.max_entries jobs, granaryd at most
// max_job_series jobs.
constexpr uint64_t kRssGrowthBound = 8 * kMiB;
constexpr size_t kDescriptorGrowthBound = 8;

// Open descriptors of process `pid`.
absl::StatusOr<size_t> OpenDescriptors(pid_t pid) {
  std::error_code error;
  std::filesystem::directory_iterator fds(absl::StrCat("/proc/", pid, "/fd"), error);
  if (error) return absl::NotFoundError(absl::StrCat("/proc/", pid, "/fd: ", error.message()));
  return static_cast<size_t>(std::distance(fds, std::filesystem::directory_iterator()));
}

// One short-lived job: a child process that moves itself into the cgroup
// whose cgroup.procs is `procs`, reads `path` whole and exits. True if it
// read the file. The child makes system calls only (the test process has
// threads).
bool RunJob(const std::string& procs, const std::string& path) {
  const pid_t child = ::fork();
  if (child == 0) {
    const int cgroup = ::open(procs.c_str(), O_WRONLY);
    if (cgroup < 0 || ::write(cgroup, "0", 1) != 1) ::_exit(2);
    ::close(cgroup);
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) ::_exit(3);
    char buffer[1 << 16];
    ssize_t got;
    while ((got = ::read(fd, buffer, sizeof(buffer))) > 0) {
    }
    ::_exit(got == 0 ? 0 : 4);
  }
  int status = 0;
  if (child < 0 || ::waitpid(child, &status, 0) != child) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Resident memory and open descriptors of granaryd and granary-fuse at one
// moment.
struct Sample {
  uint64_t server_rss = 0;
  uint64_t mount_rss = 0;
  size_t server_fds = 0;
  size_t mount_fds = 0;
};

class ManyJobsTest : public MountedTree {
 protected:
  void BuildTree() override {
    for (int i = 0; i < kFiles; ++i) {
      WriteFile(absl::StrCat(source_, "/", i, ".bin"), RandomBytes(64 << 10, i));
    }
  }
  std::vector<std::string> ServerArgs() const override { return {"--config", config_path_}; }

  void SetUp() override {
    config_path_ = config_dir_.path() + "/granaryd.yaml";
    std::ofstream(config_path_) << "max_job_series: " << kMaxJobSeries << "\n";
    MountedTree::SetUp();
  }

  // A sample; a figure that cannot be read fails the test (a zero would
  // pass the bounds).
  void TakeSample(Sample* sample) {
    absl::StatusOr<uint64_t> server_rss = ResidentBytes(server_->pid());
    absl::StatusOr<uint64_t> mount_rss = ResidentBytes(mount_->pid());
    absl::StatusOr<size_t> server_fds = OpenDescriptors(server_->pid());
    absl::StatusOr<size_t> mount_fds = OpenDescriptors(mount_->pid());
    ASSERT_TRUE(server_rss.ok()) << server_rss.status();
    ASSERT_TRUE(mount_rss.ok()) << mount_rss.status();
    ASSERT_TRUE(server_fds.ok()) << server_fds.status();
    ASSERT_TRUE(mount_fds.ok()) << mount_fds.status();
    *sample = {*server_rss, *mount_rss, *server_fds, *mount_fds};
  }

  TempDir config_dir_;
  std::string config_path_;
  TestCgroups cgroups_;
};

TEST_F(ManyJobsTest, MemoryDescriptorsAndPrometheusSeriesStayBounded) {
  ASSERT_TRUE(cgroups_.available()) << "no writable cgroup v2 hierarchy here";
  const int jobs = EnvInt("GRANARY_JOBS", 1000);
  std::vector<std::string> paths;
  for (int i = 0; i < kFiles; ++i) paths.push_back(absl::StrCat(mounted_, "/", i, ".bin"));
  // Every file cached and read once first (by the test's own uid), so that
  // what the daemons hold for the files themselves (granary-fuse keeps a
  // passed-through file's backing descriptor) is there before the first job.
  v1::PrewarmRequest prewarm;
  prewarm.set_name("ds");
  std::vector<v1::PrewarmProgress> progress;
  const grpc::Status prewarmed = Prewarm(server_->SocketStub().get(), prewarm, &progress);
  ASSERT_TRUE(prewarmed.ok()) << prewarmed.error_message();
  for (const std::string& path : paths) ASSERT_EQ(ReadWhole(path).size(), 64u << 10) << path;

  absl::StatusOr<std::unique_ptr<PrometheusServer>> prometheus =
      PrometheusServer::Start(server_->metrics_address());
  ASSERT_TRUE(prometheus.ok()) << prometheus.status();
  const uint64_t opens = static_cast<uint64_t>(kFiles + jobs);
  auto opens_counted = [&] {
    const nlohmann::json sum = (*prometheus)->Query("sum(granary_job_files_opened_total)");
    return sum.is_array() && !sum.empty() ? std::stoull(sum[0]["value"][1].get<std::string>())
                                          : 0ull;
  };
  for (int i = 0; i < 300 && opens_counted() < static_cast<uint64_t>(kFiles); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(opens_counted(), static_cast<uint64_t>(kFiles))
      << "Prometheus never saw the first reads: " << (*prometheus)->log();

  Sample before;
  TakeSample(&before);
  if (HasFatalFailure()) return;
  Sample peak = before;
  std::string trace;  // Resident memory after every tenth of the jobs.
  const auto start = std::chrono::steady_clock::now();
  for (int job = 1; job <= jobs; ++job) {
    const std::string name = absl::StrCat("job_", job);
    const std::string procs = absl::StrCat(cgroups_.Make(name), "/cgroup.procs");
    ASSERT_TRUE(RunJob(procs, paths[job % kFiles])) << "job " << job << " failed";
    ASSERT_TRUE(cgroups_.Remove(name)) << "cgroup " << name << " is still there";
    if (job % 100 == 0) {
      Sample now;
      TakeSample(&now);
      if (HasFatalFailure()) return;
      peak = {std::max(peak.server_rss, now.server_rss), std::max(peak.mount_rss, now.mount_rss),
              std::max(peak.server_fds, now.server_fds), std::max(peak.mount_fds, now.mount_fds)};
      if (job % std::max(jobs / 10, 100) == 0) {
        absl::StrAppendFormat(&trace, "after %d jobs: granaryd %.1f MiB, granary-fuse %.1f MiB\n",
                              job, double(now.server_rss) / kMiB, double(now.mount_rss) / kMiB);
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // Every job's open reaches Prometheus (granary-fuse reports every second).
  for (int i = 0; i < 300 && opens_counted() < opens; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(opens_counted(), opens);
  Sample after;
  TakeSample(&after);
  if (HasFatalFailure()) return;

  const int window = static_cast<int>(seconds) + 30;
  const nlohmann::json most =
      (*prometheus)
          ->Query(absl::StrCat("max_over_time(count(granary_job_files_opened_total)[", window,
                               "s:1s])"));
  ASSERT_TRUE(most.is_array() && !most.empty()) << most.dump();
  const int most_series = std::stoi(most[0]["value"][1].get<std::string>());
  EXPECT_LE(most_series, kMaxJobSeries + 1);
  // The jobs filled granaryd's listing (idle jobs stay listed for 10
  // minutes): the bound was reached, not only respected.
  EXPECT_GE(most_series, kMaxJobSeries);
  const nlohmann::json ever =
      (*prometheus)
          ->Query(absl::StrCat("count(count_over_time(granary_job_files_opened_total[", window + 30,
                               "s]))"));
  ASSERT_TRUE(ever.is_array() && !ever.empty()) << ever.dump();

  for (auto [name, was, highest, now] :
       {std::tuple{"granaryd", before.server_rss, peak.server_rss, after.server_rss},
        std::tuple{"granary-fuse", before.mount_rss, peak.mount_rss, after.mount_rss}}) {
    EXPECT_LE(std::max(highest, now), was + kRssGrowthBound)
        << name << " grew from " << was / kMiB << " MiB to " << std::max(highest, now) / kMiB;
  }
  EXPECT_LE(std::max(peak.server_fds, after.server_fds),
            before.server_fds + kDescriptorGrowthBound);
  EXPECT_LE(std::max(peak.mount_fds, after.mount_fds), before.mount_fds + kDescriptorGrowthBound);

  std::cout << trace
            << absl::StrFormat(
                   "%d jobs in %.1f s (%.2f ms a job)\n"
                   "granaryd RSS %.1f MiB before, %.1f MiB at most during, %.1f MiB after; "
                   "descriptors %d, %d, %d\n"
                   "granary-fuse RSS %.1f MiB before, %.1f MiB at most during, %.1f MiB after; "
                   "descriptors %d, %d, %d\n"
                   "Prometheus: at most %d series of granary_job_files_opened_total at once "
                   "(max_job_series %d), %s distinct over the run; opens counted %d\n",
                   jobs, seconds, seconds * 1000 / jobs, double(before.server_rss) / kMiB,
                   double(peak.server_rss) / kMiB, double(after.server_rss) / kMiB,
                   before.server_fds, peak.server_fds, after.server_fds,
                   double(before.mount_rss) / kMiB, double(peak.mount_rss) / kMiB,
                   double(after.mount_rss) / kMiB, before.mount_fds, peak.mount_fds,
                   after.mount_fds, most_series, kMaxJobSeries,
                   ever[0]["value"][1].get<std::string>(), opens_counted());
}

}  // namespace
}  // namespace granary::testing
