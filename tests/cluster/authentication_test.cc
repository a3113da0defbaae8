#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/net/cluster_token.h"
#include "common/net/server_address.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "proto/granary.grpc.pb.h"
#include "tests/support/granary_cluster.h"

namespace granary {
namespace {

constexpr char kToken[] = "s3cret-cluster-token-0123456789";

// Two real granaryd nodes sharing a cluster token: their TCP endpoints refuse
// calls without it, their Unix sockets do not need it, and the nodes talk to
// each other with it.
class AuthenticationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.path() + "/token") << kToken << "\n";
    std::filesystem::permissions(dir_.path() + "/token", std::filesystem::perms::owner_read |
                                                             std::filesystem::perms::owner_write);
    auto cluster =
        testing::GranaryCluster::Start({.nodes = {{"n1"}, {"n2"}},
                                        .etcd_endpoint = "",
                                        .extra_args = {"--token-file", dir_.path() + "/token"}});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
  }

  grpc::StatusCode CallStatus(const std::string& address, std::string_view token) {
    auto channel = MakeChannel(address, token);
    EXPECT_TRUE(channel.ok());
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::StatusResponse response;
    return v1::Granary::NewStub(*channel)
        ->Status(&context, v1::StatusRequest(), &response)
        .error_code();
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::GranaryCluster> cluster_;
};

TEST_F(AuthenticationTest, TcpCallsNeedTheTokenAndUnixSocketCallsDoNot) {
  const std::string tcp = cluster_->node(0).tcp_address();
  EXPECT_EQ(CallStatus(tcp, ""), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CallStatus(tcp, "wrong-token-but-long-enough"), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CallStatus(tcp, kToken), grpc::StatusCode::OK);
  EXPECT_EQ(CallStatus(cluster_->node(0).socket_address(), ""), grpc::StatusCode::OK);
  EXPECT_NE(cluster_->node(0).log().find("rejected Status: no cluster token from ipv4:127.0.0.1"),
            std::string::npos)
      << cluster_->node(0).log();
}

TEST_F(AuthenticationTest, NodesCallEachOtherWithTheToken) {
  // Status over the socket asks the other node over TCP, with the token.
  grpc::ClientContext context;
  v1::StatusResponse response;
  ASSERT_TRUE(
      cluster_->node(0).SocketStub()->Status(&context, v1::StatusRequest(), &response).ok());
  ASSERT_EQ(response.nodes_size(), 2);
  for (const v1::NodeStatus& node : response.nodes()) {
    EXPECT_EQ(node.state(), "up") << node.node_id();
  }
}

TEST(RequestAuthenticator, WithInsecureTcpEveryTcpCallIsAllowedAndWarnedAbout) {
  auto server = testing::GranarydProcess::Start(
      {.extra_args = {"--insecure-tcp"}, .with_cluster_token = false});
  ASSERT_TRUE(server.ok()) << server.status();
  grpc::ClientContext context;
  v1::StatusResponse response;
  EXPECT_TRUE((*server)->TcpStub()->Status(&context, {}, &response).ok());
  EXPECT_NE((*server)->log().find("runs without a cluster token (insecure_tcp)"), std::string::npos)
      << (*server)->log();
}

TEST(ClusterToken, LoadsOneLineAndRejectsShortOrMissingFiles) {
  testing::TempDir dir;
  std::string path = dir.path() + "/token";
  std::ofstream(path) << "  " << kToken << "\n";
  std::filesystem::permissions(
      path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_EQ(*LoadClusterToken(path), kToken);
  std::ofstream(path) << "short\n";
  auto short_token = LoadClusterToken(path);
  EXPECT_EQ(short_token.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(short_token.status().message().find(path), std::string::npos);
  std::ofstream(path) << kToken << "\n" << kToken << "\n";
  EXPECT_FALSE(LoadClusterToken(path).ok());
  EXPECT_EQ(LoadClusterToken(dir.path() + "/none").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(TokensMatch("abc", "abc"));
  EXPECT_FALSE(TokensMatch("abd", "abc"));
  EXPECT_FALSE(TokensMatch("abcd", "abc"));
}

}  // namespace
}  // namespace granary
