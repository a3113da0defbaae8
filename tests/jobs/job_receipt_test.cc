// Receipts of jobs that read through a real granary-fuse mount over a real
// granaryd, from inside real cgroups named as Slurm names a job's: a job that
// read a dataset refreshed mid-job names both versions with their digests
// and what it read of each, in `granary jobs end`, `granary jobs --receipt`
// (--json and the table) and the file granaryd writes to receipt_dir (mode
// 0640); what the job read after it ended is added to its receipt. An
// unknown job is NOT_FOUND by name, a malformed one INVALID_ARGUMENT; a
// user who did not read in a job may not see its receipt, nor end a job;
// a bad receipt_dir stops granaryd at start, naming it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/dataset/chunk_key.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "nlohmann/json.hpp"
#include "proto/jobs.grpc.pb.h"
#include "tests/fuse/mounted_tree.h"
#include "tests/jobs/job_cgroups.h"

namespace granary::testing {
namespace {

class JobReceiptTest : public MountedTree {
 protected:
  void BuildTree() override {
    WriteFile(source_ + "/a.bin", RandomBytes(300'000, 1));
    WriteFile(source_ + "/b.bin", RandomBytes(200'000, 2));
    ASSERT_EQ(::chmod(source_.c_str(), 0755), 0);
    for (const char* name : {"/a.bin", "/b.bin"}) {
      ASSERT_EQ(::chmod((source_ + name).c_str(), 0644), 0);
    }
    ASSERT_EQ(::chmod(source_dir_.path().c_str(), 0755), 0);
  }

  std::vector<std::string> MountArgs() const override {
    std::vector<std::string> args = MountedTree::MountArgs();
    args.insert(args.end(), {"-o", "allow_other"});
    return args;
  }
  std::vector<std::string> ServerArgs() const override { return {"--config", config_path_}; }

  void SetUp() override {
    receipt_dir_ = config_dir_.path() + "/receipts";
    config_path_ = config_dir_.path() + "/granaryd.yaml";
    std::ofstream(config_path_) << "socket_mode: \"0666\"\nreceipt_dir: " << receipt_dir_ << "\n";
    MountedTree::SetUp();
    if (HasFatalFailure()) return;
    // Users other than root reach the socket and the mount.
    const std::string socket_dir = std::filesystem::path(server_->socket_path()).parent_path();
    ASSERT_EQ(::chmod(socket_dir.c_str(), 0755), 0);
    ASSERT_EQ(::chmod(std::filesystem::path(mount_->path()).parent_path().c_str(), 0755), 0);
  }

  // `granary ARGS` as user `uid`: exit code and output.
  std::pair<int, std::string> Granary(const std::string& args, uid_t uid = 0) {
    return RunInCgroup(
        "", uid,
        absl::StrCat(GRANARY_CLI_PATH, " --server ", server_->socket_address(), " ", args));
  }

  nlohmann::json Json(const std::string& args) {
    auto [code, output] = Granary(args);
    EXPECT_EQ(code, 0) << args << ": " << output;
    if (code != 0) return nlohmann::json();
    return nlohmann::json::parse(output, nullptr, /*allow_exceptions=*/false);
  }

  // Polls granary jobs --json until `job` opened `files` files of dataset ds
  // and read `bytes` of it (granary-fuse reports every second); whether it
  // did.
  bool Counted(const std::string& job, uint64_t files, uint64_t bytes) {
    for (int i = 0; i < 100; ++i) {
      nlohmann::json jobs = Json("jobs --json");
      if (jobs.is_object()) {
        for (const nlohmann::json& entry : jobs["jobs"]) {
          if (entry["job"] == job && entry["dataset"] == "ds" &&
              entry["files_opened"].get<uint64_t>() >= files &&
              entry["bytes_read"].get<uint64_t>() >= bytes) {
            return true;
          }
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  // Reads `files` (names in dataset ds) through the mount from cgroup
  // job_<id> as user `uid`, and waits until granaryd counted the job's
  // files and bytes so far.
  void ReadAsJob(int id, const std::vector<std::string>& files, uid_t uid, uint64_t files_by_then,
                 uint64_t bytes_by_then) {
    if (!cgroups_.available()) GTEST_FAIL() << "no writable cgroup v2 hierarchy here";
    std::string paths;
    for (const std::string& file : files) absl::StrAppend(&paths, " ", mounted_, "/", file);
    auto [code, output] =
        RunInCgroup(cgroups_.Make(absl::StrCat("job_", id)), uid, "cat" + paths + " > /dev/null");
    ASSERT_EQ(code, 0) << output;
    ASSERT_TRUE(Counted(absl::StrCat("slurm:", id), files_by_then, bytes_by_then));
  }

  TempDir config_dir_;
  std::string config_path_;
  std::string receipt_dir_;
  TestCgroups cgroups_;
};

const nlohmann::json* VersionIn(const nlohmann::json& receipt, uint64_t version) {
  for (const nlohmann::json& read : receipt["reads"]) {
    if (read["dataset"] == "ds" && read["version"] == FormatVersion(version)) return &read;
  }
  return nullptr;
}

TEST_F(JobReceiptTest, AJobThatReadADatasetRefreshedMidJobNamesBothVersions) {
  absl::StatusOr<v1::DatasetInfo> before = GetDataset(*server_, "ds");
  ASSERT_TRUE(before.ok()) << before.status();
  ReadAsJob(777, {"a.bin", "b.bin"}, 0, 2, 500'000);

  // The source changes and the dataset is refreshed while the job runs.
  WriteFile(source_ + "/b.bin", RandomBytes(250'000, 3));
  ASSERT_EQ(::chmod((source_ + "/b.bin").c_str(), 0644), 0);
  auto [refreshed, refresh_output] = Granary("dataset refresh ds");
  ASSERT_EQ(refreshed, 0) << refresh_output;
  absl::StatusOr<v1::DatasetInfo> after = GetDataset(*server_, "ds");
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_NE(before->version(), after->version());
  // The mount shows the new version within a second.
  std::error_code error;
  for (int i = 0; i < 100 && std::filesystem::file_size(mounted_ + "/b.bin", error) != 250'000;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(std::filesystem::file_size(mounted_ + "/b.bin"), 250'000u);
  ReadAsJob(777, {"b.bin"}, 0, 3, 750'000);

  const nlohmann::json ended = Json("jobs end slurm:777 --json");
  ASSERT_TRUE(ended.is_object());
  const nlohmann::json& receipt = ended["receipt"];
  EXPECT_EQ(receipt["job"], "slurm:777");
  ASSERT_EQ(receipt["reads"].size(), 2u) << receipt.dump(2);
  const nlohmann::json* first = VersionIn(receipt, before->version());
  ASSERT_NE(first, nullptr) << receipt.dump(2);
  EXPECT_EQ((*first)["files_opened"], 2);
  EXPECT_EQ((*first)["bytes_read"], 500'000u);
  const nlohmann::json* second = VersionIn(receipt, after->version());
  ASSERT_NE(second, nullptr) << receipt.dump(2);
  EXPECT_EQ((*second)["files_opened"], 1);
  EXPECT_EQ((*second)["bytes_read"], 250'000u);
  uint64_t by_origin = 0;
  for (const auto& [origin, bytes] : (*second)["bytes"].items()) by_origin += bytes.get<uint64_t>();
  EXPECT_EQ(by_origin, 250'000u);
  EXPECT_EQ((*first)["errors"], 0);
  EXPECT_GT(receipt["started_unix_ms"].get<int64_t>(), 0);
  EXPECT_GE(receipt["ended_unix_ms"].get<int64_t>(), receipt["started_unix_ms"].get<int64_t>());
  EXPECT_EQ(receipt["reader_uids"], nlohmann::json::array({0}));

  // The file granaryd wrote holds the same receipt, for granaryd's user
  // and the directory's group alone.
  const std::string path = receipt_dir_ + "/slurm_777.json";
  EXPECT_EQ(ended["path"], path);
  struct stat info {};
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0640u);
  EXPECT_EQ(nlohmann::json::parse(ReadWhole(path)), receipt);
  ASSERT_EQ(::stat(receipt_dir_.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u) << "receipt_dir is created private";

  // The same receipt on asking, and in the table.
  EXPECT_EQ(Json("jobs --receipt slurm:777 --json"), receipt);
  auto [shown, table] = Granary("jobs --receipt slurm:777");
  ASSERT_EQ(shown, 0) << table;
  EXPECT_NE(table.find(FormatVersion(before->version())), std::string::npos) << table;
  EXPECT_NE(table.find(FormatVersion(after->version())), std::string::npos) << table;
  // The job's reads left the running jobs' list.
  for (const nlohmann::json& entry : Json("jobs --json")["jobs"]) {
    EXPECT_NE(entry["job"], "slurm:777") << entry.dump();
  }

  // What the job read after it ended comes to its receipt, and its file.
  auto [late, late_output] = RunInCgroup(cgroups_.Make("job_777"), 0,
                                         absl::StrCat("cat ", mounted_, "/a.bin > /dev/null"));
  ASSERT_EQ(late, 0) << late_output;
  nlohmann::json grown;
  for (int i = 0; i < 100; ++i) {
    grown = Json("jobs --receipt slurm:777 --json");
    const nlohmann::json* now = VersionIn(grown, after->version());
    if (now != nullptr && (*now)["bytes_read"] == 550'000u) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const nlohmann::json* now = VersionIn(grown, after->version());
  ASSERT_NE(now, nullptr) << grown.dump(2);
  EXPECT_EQ((*now)["files_opened"], 2) << grown.dump(2);
  EXPECT_EQ((*now)["bytes_read"], 550'000u);
  EXPECT_EQ(nlohmann::json::parse(ReadWhole(path)), grown);
}

TEST_F(JobReceiptTest, WhatStandsWhereAReceiptIsWrittenAsideIsReplacedNotWrittenThrough) {
  ReadAsJob(901, {"a.bin"}, 0, 1, 300'000);
  // A FIFO would block a write through it for good, and a file another
  // user made would be theirs once renamed into place.
  const std::string aside = receipt_dir_ + "/slurm_901.json.new";
  ASSERT_EQ(::mkfifo(aside.c_str(), 0666), 0);
  auto [ended, output] = Granary("jobs end slurm:901");
  ASSERT_EQ(ended, 0) << output;
  struct stat written;
  ASSERT_EQ(::lstat((receipt_dir_ + "/slurm_901.json").c_str(), &written), 0);
  EXPECT_TRUE(S_ISREG(written.st_mode));
  EXPECT_EQ(written.st_mode & 07777, 0640u);
  EXPECT_FALSE(std::filesystem::exists(aside));
}

TEST_F(JobReceiptTest, AnUnknownOrMalformedJobIsRefusedByName) {
  auto [unknown, unknown_output] = Granary("jobs --receipt slurm:424242");
  EXPECT_NE(unknown, 0);
  EXPECT_NE(unknown_output.find("no receipt of job 'slurm:424242'"), std::string::npos)
      << unknown_output;
  {
    auto jobs = v1::Jobs::NewStub(
        grpc::CreateChannel(server_->socket_address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    v1::GetReceiptRequest request;
    request.set_job("slurm:424242");
    v1::JobReceipt receipt;
    EXPECT_EQ(jobs->GetReceipt(&context, request, &receipt).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }

  auto [malformed, malformed_output] = Granary("jobs --receipt ../../etc/passwd");
  EXPECT_NE(malformed, 0);
  EXPECT_NE(malformed_output.find("job '../../etc/passwd' is not a job name"), std::string::npos)
      << malformed_output;
  auto [end_malformed, end_output] = Granary("jobs end slurm:12x");
  EXPECT_NE(end_malformed, 0);
  EXPECT_NE(end_output.find("job 'slurm:12x' is not a job name"), std::string::npos) << end_output;

  // A job that read nothing here ends with no receipt.
  auto [idle, idle_output] = Granary("jobs end slurm:31337");
  EXPECT_EQ(idle, 0) << idle_output;
  EXPECT_NE(idle_output.find("read nothing"), std::string::npos) << idle_output;
  EXPECT_NE(Granary("jobs --receipt slurm:31337").first, 0);
  EXPECT_FALSE(std::filesystem::exists(receipt_dir_ + "/slurm_31337.json"));
}

TEST_F(JobReceiptTest, OnlyTheJobsOwnReadersAndAdministratorsSeeItsReceipt) {
  ReadAsJob(888, {"a.bin"}, 0, 1, 300'000);
  ReadAsJob(889, {"b.bin"}, kNobody, 1, 200'000);
  auto [ended_root, root_output] = Granary("jobs end slurm:888");
  ASSERT_EQ(ended_root, 0) << root_output;

  // Ending a job is an administrator's act.
  auto [end_refused, end_output] = Granary("jobs end slurm:889", kNobody);
  EXPECT_NE(end_refused, 0);
  EXPECT_NE(end_output.find("administrator"), std::string::npos) << end_output;
  auto [ended_nobody, nobody_output] = Granary("jobs end slurm:889");
  ASSERT_EQ(ended_nobody, 0) << nobody_output;

  // nobody read in job 889, not in job 888.
  auto [refused, refused_output] = Granary("jobs --receipt slurm:888 --json", kNobody);
  EXPECT_NE(refused, 0);
  EXPECT_NE(refused_output.find("may not read the receipt of job 'slurm:888'"), std::string::npos)
      << refused_output;
  auto [own, own_output] = Granary("jobs --receipt slurm:889 --json", kNobody);
  ASSERT_EQ(own, 0) << own_output;
  EXPECT_EQ(nlohmann::json::parse(own_output)["reader_uids"], nlohmann::json::array({kNobody}));

  // The files are not for other users either.
  auto [cat_refused, cat_output] =
      RunInCgroup("", kNobody, absl::StrCat("cat ", receipt_dir_, "/slurm_889.json"));
  EXPECT_NE(cat_refused, 0) << cat_output;
}

class BadReceiptDirTest : public ::testing::Test {
 protected:
  // granaryd's exit code and standard error with receipt_dir `dir`.
  ExitedProcess Run(const std::string& dir) {
    const std::string config = temp_.path() + "/granaryd.yaml";
    std::ofstream(config) << "receipt_dir: " << dir << "\n";
    absl::StatusOr<ExitedProcess> run =
        RunGranaryd({"--config", config, "--data-dir", temp_.path() + "/data", "--socket",
                     temp_.path() + "/s.sock"});
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? *run : ExitedProcess();
  }

  TempDir temp_;
};

TEST_F(BadReceiptDirTest, GranarydRefusesToStartNamingTheDirectoryAndWhatIsWrong) {
  WriteFile(temp_.path() + "/plain", "not a directory");
  ExitedProcess file = Run(temp_.path() + "/plain");
  EXPECT_NE(file.exit_code, 0);
  EXPECT_NE(file.stderr_text.find(
                absl::StrCat("receipt_dir '", temp_.path(), "/plain' is not a directory")),
            std::string::npos)
      << file.stderr_text;

  ExitedProcess relative = Run("receipts");
  EXPECT_NE(relative.exit_code, 0);
  EXPECT_NE(relative.stderr_text.find("receipt_dir 'receipts' is not an absolute path"),
            std::string::npos)
      << relative.stderr_text;

  const std::string open_to_all = temp_.path() + "/everyone";
  ASSERT_EQ(::mkdir(open_to_all.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(open_to_all.c_str(), 0777), 0);
  ExitedProcess shared = Run(open_to_all);
  EXPECT_NE(shared.exit_code, 0);
  EXPECT_NE(shared.stderr_text.find(
                absl::StrCat("receipt_dir '", open_to_all, "' is writable by everyone")),
            std::string::npos)
      << shared.stderr_text;

  const std::string open_to_group = temp_.path() + "/group";
  ASSERT_EQ(::mkdir(open_to_group.c_str(), 0770), 0);
  ASSERT_EQ(::chmod(open_to_group.c_str(), 0770), 0);
  ExitedProcess grouped = Run(open_to_group);
  EXPECT_NE(grouped.exit_code, 0);
  EXPECT_NE(grouped.stderr_text.find(
                absl::StrCat("receipt_dir '", open_to_group, "' is writable by its group")),
            std::string::npos)
      << grouped.stderr_text;

  ExitedProcess unreachable = Run(temp_.path() + "/plain/receipts");
  EXPECT_NE(unreachable.exit_code, 0);
  EXPECT_NE(unreachable.stderr_text.find("receipt_dir"), std::string::npos)
      << unreachable.stderr_text;
  EXPECT_NE(unreachable.stderr_text.find(temp_.path() + "/plain/receipts"), std::string::npos)
      << unreachable.stderr_text;
}

}  // namespace
}  // namespace granary::testing
