// The Staging service of a real granaryd (proto/staging.proto) without a
// Slurm controller (its scontrol fails): bad input is refused naming the
// fault, a dataset the catalog does not know becomes a failed target, a
// stage-in that cannot read the queue keeps its forecast, and a top-up fills
// the groups of the job's nodes once, fetching nothing the second time, and
// stops at the policy's longest wait.
// Holds (capacity 96 MiB, hold_share 0.5): one past the share is refused
// naming the holds that fill it, a release makes room, a lease lapses.
// The Slurm side runs against real daemons in
// tests/scheduler_hooks/slurm_stage_in_test.sh.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "grpcpp/client_context.h"
#include "proto/staging.grpc.pb.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {
namespace {

constexpr uint32_t kChunk = 1 << 20;

class StageInTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string config = config_dir_.path() + "/granaryd.yaml";
    std::ofstream(config) << "scontrol: /bin/false\nstage_in_poll_ms: 100\ncapacity: 96MiB\n"
                             "hold_share: 0.5\n";
    GranarydOptions options;
    options.extra_args = {"--config", config, "--node-id", "n1", "--group", "g1"};
    auto server = GranarydProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = server_->SocketStub();
    staging_ = v1::Staging::NewStub(server_->SocketChannel());
    WriteSourceFile(source_.path() + "/ds", "train/a.bin", PatternBytes(3 * kChunk + 17, 1));
    v1::DatasetInfo info;
    grpc::Status added = AddDataset(stub_.get(), "ds", source_.path() + "/ds", kChunk, &info);
    ASSERT_TRUE(added.ok()) << added.error_message();
  }

  grpc::Status Start(const std::string& job, std::vector<std::string> datasets,
                     v1::StageIn* stage_in) {
    v1::StartStageInRequest request;
    request.set_job_id(job);
    for (const std::string& dataset : datasets) request.add_datasets(dataset);
    grpc::ClientContext context;
    return staging_->StartStageIn(&context, request, stage_in);
  }

  grpc::Status TopUp(const v1::TopUpStageInRequest& request, v1::StageIn* stage_in) {
    grpc::ClientContext context;
    return staging_->TopUpStageIn(&context, request, stage_in);
  }

  static v1::TopUpStageInRequest TopUpOn(const std::string& job, const std::string& node) {
    v1::TopUpStageInRequest request;
    request.set_job_id(job);
    request.add_nodes(node);
    request.set_max_wait_ms(20'000);
    return request;
  }

  grpc::Status PlaceHold(const std::string& holder, const std::string& dataset,
                         uint32_t lease_ms = 60'000) {
    v1::PlaceHoldRequest request;
    request.set_holder(holder);
    request.add_datasets(dataset);
    request.set_lease_ms(lease_ms);
    v1::PlaceHoldResponse response;
    grpc::ClientContext context;
    return staging_->PlaceHold(&context, request, &response);
  }

  v1::NodeHolds LocalHolds() {
    v1::ListHoldsRequest request;
    request.set_local_only(true);
    v1::ListHoldsResponse response;
    grpc::ClientContext context;
    EXPECT_TRUE(staging_->ListHolds(&context, request, &response).ok());
    EXPECT_EQ(response.nodes_size(), 1);
    return response.nodes_size() == 1 ? response.nodes(0) : v1::NodeHolds();
  }

  uint64_t SourceBytes() {
    v1::StatusResponse status;
    grpc::ClientContext context;
    EXPECT_TRUE(stub_->Status(&context, v1::StatusRequest(), &status).ok());
    return status.nodes(0).bytes_from_source();
  }

  TempDir config_dir_;
  TempDir source_;
  std::unique_ptr<GranarydProcess> server_;
  std::unique_ptr<v1::Granary::Stub> stub_;
  std::unique_ptr<v1::Staging::Stub> staging_;
};

void ExpectError(const grpc::Status& status, grpc::StatusCode code, const std::string& named) {
  EXPECT_EQ(status.error_code(), code) << status.error_message();
  EXPECT_NE(status.error_message().find(named), std::string::npos)
      << "'" << status.error_message() << "' does not name '" << named << "'";
}

TEST_F(StageInTest, BadInputIsRefusedNamingTheFault) {
  v1::StageIn stage_in;
  ExpectError(Start("12a", {"ds"}, &stage_in), grpc::StatusCode::INVALID_ARGUMENT, "'12a'");
  ExpectError(Start(std::string(21, '1'), {"ds"}, &stage_in), grpc::StatusCode::INVALID_ARGUMENT,
              "20 digits");
  ExpectError(Start("12", {}, &stage_in), grpc::StatusCode::INVALID_ARGUMENT, "0 datasets");
  ExpectError(Start("12", std::vector<std::string>(65, "ds"), &stage_in),
              grpc::StatusCode::INVALID_ARGUMENT, "65 datasets");

  v1::TopUpStageInRequest no_wait = TopUpOn("12", "n1");
  no_wait.set_max_wait_ms(0);
  ExpectError(TopUp(no_wait, &stage_in), grpc::StatusCode::INVALID_ARGUMENT, "max_wait_ms 0");
  v1::TopUpStageInRequest too_much = TopUpOn("12", "n1");
  too_much.set_enough_share(1.5);
  ExpectError(TopUp(too_much, &stage_in), grpc::StatusCode::INVALID_ARGUMENT, "enough_share 1.5");
  v1::TopUpStageInRequest no_nodes = TopUpOn("12", "n1");
  no_nodes.clear_nodes();
  ExpectError(TopUp(no_nodes, &stage_in), grpc::StatusCode::INVALID_ARGUMENT, "0 nodes");
  ExpectError(TopUp(TopUpOn("12", "n1"), &stage_in), grpc::StatusCode::INVALID_ARGUMENT,
              "does not follow job 12");

  v1::EndStageInRequest end;
  end.set_job_id("404");
  grpc::ClientContext context;
  ExpectError(staging_->EndStageIn(&context, end, &stage_in), grpc::StatusCode::NOT_FOUND,
              "job 404");
}

TEST_F(StageInTest, UnknownDatasetIsAFailedTargetAndTheOthersAreStaged) {
  v1::StageIn stage_in;
  ASSERT_TRUE(Start("7", {"ds", "nosuch"}, &stage_in).ok());
  EXPECT_EQ(stage_in.state(), "forecast");
  ASSERT_EQ(stage_in.datasets_size(), 2);
  ASSERT_EQ(stage_in.targets_size(), 1);
  EXPECT_EQ(stage_in.targets(0).dataset(), "nosuch");
  EXPECT_EQ(stage_in.targets(0).state(), "failed");
  EXPECT_NE(stage_in.targets(0).error().find("nosuch"), std::string::npos)
      << stage_in.targets(0).error();

  ASSERT_TRUE(TopUp(TopUpOn("7", "n1"), &stage_in).ok());
  EXPECT_EQ(stage_in.state(), "running");
  ASSERT_EQ(stage_in.groups_size(), 1);
  EXPECT_EQ(stage_in.groups(0), "g1");
  ASSERT_EQ(stage_in.targets_size(), 2);
  EXPECT_EQ(stage_in.targets(1).dataset(), "ds");
  EXPECT_EQ(stage_in.targets(1).state(), "cached") << stage_in.targets(1).error();
  EXPECT_EQ(stage_in.targets(1).bytes_cached(), 3 * kChunk + 17);
}

TEST_F(StageInTest, TopUpFetchesOnlyWhatTheGroupLacks) {
  v1::StageIn stage_in;
  ASSERT_TRUE(Start("8", {"ds"}, &stage_in).ok());
  // The queue cannot be read: the stage-in keeps its forecast, which names
  // no nodes yet, and warms nothing.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_EQ(SourceBytes(), 0u);

  ASSERT_TRUE(TopUp(TopUpOn("8", "n1"), &stage_in).ok());
  ASSERT_EQ(stage_in.targets_size(), 1);
  EXPECT_EQ(stage_in.targets(0).state(), "cached");
  const uint64_t fetched = SourceBytes();
  EXPECT_EQ(fetched, 3 * kChunk + 17);
  ASSERT_TRUE(TopUp(TopUpOn("8", "n1"), &stage_in).ok());
  EXPECT_EQ(stage_in.targets(0).state(), "cached");
  EXPECT_EQ(SourceBytes(), fetched);

  grpc::ClientContext context;
  v1::EndStageInRequest end;
  end.set_job_id("8");
  ASSERT_TRUE(staging_->EndStageIn(&context, end, &stage_in).ok());
  EXPECT_EQ(stage_in.state(), "ended");
  v1::ListStageInsResponse listed;
  grpc::ClientContext list_context;
  ASSERT_TRUE(staging_->ListStageIns(&list_context, v1::ListStageInsRequest(), &listed).ok());
  ASSERT_EQ(listed.stage_ins_size(), 1);
  EXPECT_EQ(listed.stage_ins(0).state(), "ended");
}

TEST_F(StageInTest, TopUpHoldsTheJobNoLongerThanThePolicySays) {
  WriteSourceFile(source_.path() + "/large", "l.bin", PatternBytes(64 << 20, 3));
  v1::DatasetInfo info;
  ASSERT_TRUE(AddDataset(stub_.get(), "large", source_.path() + "/large", kChunk, &info).ok());
  v1::TopUpStageInRequest request = TopUpOn("10", "n1");
  request.add_datasets("large");
  request.set_max_wait_ms(1);
  v1::StageIn stage_in;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(TopUp(request, &stage_in).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  ASSERT_EQ(stage_in.targets_size(), 1);
  // A machine fast enough to cache the 64 MiB before the prewarm's first
  // look at the clock has it whole, which the policy allows; otherwise the
  // top-up stops and says why.
  const v1::StageInTarget& target = stage_in.targets(0);
  if (target.state() == "cached") {
    EXPECT_EQ(target.bytes_cached(), target.bytes_total());
  } else {
    EXPECT_EQ(target.state(), "partial");
    EXPECT_NE(target.error().find("holds a job at most 1 ms"), std::string::npos) << target.error();
  }
}

TEST_F(StageInTest, NodesThatAreNotGranaryNodesAreNamedAndNothingIsWarmed) {
  v1::StageIn stage_in;
  ASSERT_TRUE(Start("9", {"ds"}, &stage_in).ok());
  ASSERT_TRUE(TopUp(TopUpOn("9", "gpu-elsewhere"), &stage_in).ok());
  EXPECT_EQ(stage_in.groups_size(), 0);
  EXPECT_NE(stage_in.note().find("none of the job's nodes is a Granary node"), std::string::npos)
      << stage_in.note();
  EXPECT_EQ(SourceBytes(), 0u);
}

TEST_F(StageInTest, HoldPastTheShareIsRefusedNamingTheHolds) {
  WriteSourceFile(source_.path() + "/big", "b.bin", PatternBytes(46 << 20, 2));
  v1::DatasetInfo info;
  ASSERT_TRUE(AddDataset(stub_.get(), "big", source_.path() + "/big", kChunk, &info).ok());

  ASSERT_TRUE(PlaceHold("slurm:1", "ds").ok());
  ExpectError(PlaceHold("slurm:2", "big"), grpc::StatusCode::RESOURCE_EXHAUSTED,
              "'ds' for slurm:1");
  ExpectError(PlaceHold("slurm:2", "big"), grpc::StatusCode::RESOURCE_EXHAUSTED,
              "hold_share 0.5 of 96.0 MiB");
  v1::NodeHolds holds = LocalHolds();
  EXPECT_EQ(holds.node_id(), "n1");
  EXPECT_EQ(holds.share_bytes(), 48u << 20);
  EXPECT_EQ(holds.held_bytes(), 3 * kChunk + 17);
  ASSERT_EQ(holds.holds_size(), 1);
  EXPECT_EQ(holds.holds(0).holder(), "slurm:1");
  EXPECT_EQ(holds.holds(0).dataset(), "ds");

  // Renewing a hold never counts it twice.
  ASSERT_TRUE(PlaceHold("slurm:1", "ds").ok());
  EXPECT_EQ(LocalHolds().held_bytes(), 3 * kChunk + 17);

  v1::ReleaseHoldRequest release;
  release.set_holder("slurm:1");
  v1::ReleaseHoldResponse released;
  grpc::ClientContext context;
  ASSERT_TRUE(staging_->ReleaseHold(&context, release, &released).ok());
  EXPECT_EQ(released.released(), 1u);
  ASSERT_TRUE(PlaceHold("slurm:2", "big").ok());
  EXPECT_EQ(LocalHolds().holds_size(), 1);
}

TEST_F(StageInTest, BadHoldsAreRefusedAndLeasesLapse) {
  ExpectError(PlaceHold("", "ds"), grpc::StatusCode::INVALID_ARGUMENT, "holder ''");
  ExpectError(PlaceHold("slurm:1", "ds", 10), grpc::StatusCode::INVALID_ARGUMENT, "lease 10 ms");
  ExpectError(PlaceHold("slurm:1", "nosuch"), grpc::StatusCode::NOT_FOUND, "nosuch");
  ASSERT_TRUE(PlaceHold("slurm:1", "ds", 1000).ok());
  EXPECT_EQ(LocalHolds().holds_size(), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  EXPECT_EQ(LocalHolds().holds_size(), 0);
}

}  // namespace
}  // namespace granary::testing
