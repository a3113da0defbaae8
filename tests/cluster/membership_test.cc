#include <gtest/gtest.h>

#include <fstream>
#include <mutex>
#include <thread>

#include "cache_server/membership/etcd_membership.h"
#include "cache_server/membership/static_membership.h"
#include "tests/support/child_process.h"
#include "tests/support/etcd_process.h"

namespace granary {
namespace {

using testing::EtcdProcess;
using testing::TempDir;

// Records what a membership source reports.
class Recorder {
 public:
  MembershipListener Listener() {
    return [this](std::vector<Member> members) {
      std::lock_guard<std::mutex> lock(mutex_);
      latest_ = std::move(members);
      ++reports_;
    };
  }
  std::vector<std::string> Ids() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::string> ids;
    for (const Member& member : latest_) ids.push_back(member.id);
    return ids;
  }
  int reports() {
    std::lock_guard<std::mutex> lock(mutex_);
    return reports_;
  }
  // Polls until the reported ids equal `expected` or `timeout` passes.
  bool WaitForIds(const std::vector<std::string>& expected, std::chrono::seconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (Ids() == expected) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return Ids() == expected;
  }

 private:
  std::mutex mutex_;
  std::vector<Member> latest_;
  int reports_ = 0;
};

void WriteFile(const std::string& path, const std::string& text) {
  std::string temporary = path + ".tmp";
  std::ofstream(temporary) << text;
  std::rename(temporary.c_str(), path.c_str());
}

constexpr char kTwoMembers[] = R"(members:
  - {id: a, address: 127.0.0.1:7001, group: rack-a}
  - {id: b, address: 127.0.0.1:7002, group: rack-b, weight: 2}
)";

TEST(StaticMembership, ReloadsChangesAndKeepsTheLastGoodListOnErrors) {
  TempDir dir;
  std::string path = dir.path() + "/members.yaml";
  WriteFile(path, kTwoMembers);
  Recorder recorder;
  constexpr std::chrono::milliseconds kPollInterval(50);
  auto membership = StaticMembership::Start(path, recorder.Listener(), kPollInterval);
  ASSERT_TRUE(membership.ok()) << membership.status();
  EXPECT_EQ(recorder.Ids(), (std::vector<std::string>{"a", "b"}));

  WriteFile(path, std::string(kTwoMembers) + "  - {id: c, address: 127.0.0.1:7003}\n");
  EXPECT_TRUE(recorder.WaitForIds({"a", "b", "c"}, std::chrono::seconds(5)));

  int reports = recorder.reports();
  WriteFile(path, "members:\n  - {id: a, address: nowhere}\n");
  // A refused file leaves nothing to poll for: it has had eight polls to be
  // (wrongly) reported.
  std::this_thread::sleep_for(8 * kPollInterval);
  EXPECT_EQ(recorder.reports(), reports);
  EXPECT_EQ(recorder.Ids(), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(StaticMembership, RejectsAMissingOrBadInitialFile) {
  TempDir dir;
  Recorder recorder;
  auto missing = StaticMembership::Start(dir.path() + "/none.yaml", recorder.Listener());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  WriteFile(dir.path() + "/bad.yaml", "members: 7\n");
  auto bad = StaticMembership::Start(dir.path() + "/bad.yaml", recorder.Listener());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("bad.yaml"), std::string::npos);
  EXPECT_EQ(recorder.reports(), 0);
}

TEST(EtcdMemberValue, RoundTripsAndRejectsBadValues) {
  Member member{"gpu-7", "10.0.0.7:7070", "rack-3", 4, true};
  auto decoded = DecodeMemberValue("gpu-7", EncodeMemberValue(member));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, member);
  EXPECT_FALSE(DecodeMemberValue("x", "not json").ok());
  EXPECT_FALSE(DecodeMemberValue("x", R"({"group":"g"})").ok());
  EXPECT_FALSE(DecodeMemberValue("x", R"({"address":"h:1","weight":0})").ok());
  EXPECT_FALSE(DecodeMemberValue("x", R"({"address":"h:1","weight":"heavy"})").ok());
}

TEST(EtcdMembership, RejectsBadEndpointsAndNamesAnUnreachableOne) {
  Recorder recorder;
  EtcdMembership::Options options;
  options.self = {"a", "127.0.0.1:7001", "default", 1, true};
  options.endpoint = "https://127.0.0.1:2379";
  EXPECT_EQ(EtcdMembership::Start(options, recorder.Listener()).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.endpoint = "not an endpoint";
  EXPECT_EQ(EtcdMembership::Start(options, recorder.Listener()).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.endpoint = "http://127.0.0.1:" + std::to_string(testing::FreeTcpPort());
  auto unreachable = EtcdMembership::Start(options, recorder.Listener());
  ASSERT_FALSE(unreachable.ok());
  EXPECT_NE(unreachable.status().message().find(options.endpoint.substr(7)), std::string::npos)
      << unreachable.status();
}

class EtcdMembershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto etcd = EtcdProcess::Start();
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = *std::move(etcd);
  }

  std::unique_ptr<EtcdMembership> Join(const std::string& id, Recorder* recorder) {
    EtcdMembership::Options options;
    options.endpoint = etcd_->endpoint();
    options.self = {id, "127.0.0.1:7000", "default", 1, true};
    options.lease_ttl = std::chrono::seconds(2);
    auto membership = EtcdMembership::Start(options, recorder->Listener());
    EXPECT_TRUE(membership.ok()) << membership.status();
    return membership.ok() ? *std::move(membership) : nullptr;
  }

  std::unique_ptr<EtcdProcess> etcd_;
};

TEST_F(EtcdMembershipTest, MembersSeeEachOtherJoinAndLeave) {
  Recorder seen_by_a;
  Recorder seen_by_b;
  auto a = Join("a", &seen_by_a);
  auto b = Join("b", &seen_by_b);
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(seen_by_a.WaitForIds({"a", "b"}, std::chrono::seconds(10)));
  EXPECT_TRUE(seen_by_b.WaitForIds({"a", "b"}, std::chrono::seconds(10)));
  b.reset();  // A clean shutdown revokes the lease: gone at once, not after the TTL.
  EXPECT_TRUE(seen_by_a.WaitForIds({"a"}, std::chrono::seconds(1)));
}

TEST_F(EtcdMembershipTest, AKilledMemberLeavesWhenItsLeaseExpires) {
  Recorder seen_by_a;
  auto a = Join("a", &seen_by_a);
  ASSERT_TRUE(a);
  TempDir dir;
  auto child = testing::SpawnChild(GRANARY_TEST_ETCD_MEMBER_PATH,
                                   {etcd_->endpoint(), "doomed", "2"}, dir.path() + "/member.log");
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE(seen_by_a.WaitForIds({"a", "doomed"}, std::chrono::seconds(10)));
  // Well past the TTL the survivor's own lease must still be alive.
  testing::KillChild(*child);
  EXPECT_TRUE(seen_by_a.WaitForIds({"a"}, std::chrono::seconds(8)));
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_EQ(seen_by_a.Ids(), (std::vector<std::string>{"a"}));
}

}  // namespace
}  // namespace granary
