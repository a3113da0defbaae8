#include <gtest/gtest.h>

#include <fstream>

#include "cache_server/request_authenticator.h"
#include "common/cluster_token.h"
#include "common/server_address.h"
#include "grpcpp/client_context.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "proto/granary.grpc.pb.h"
#include "tests/support/granaryd_process.h"

namespace granary {
namespace {

constexpr char kToken[] = "s3cret-cluster-token-0123456789";

// Answers Status only, behind the authenticator, as granaryd's service does.
class GuardedService final : public v1::Granary::Service {
 public:
  explicit GuardedService(std::string token) : authenticator_(std::move(token)) {}

  grpc::Status Status(grpc::ServerContext* context, const v1::StatusRequest*,
                      v1::StatusResponse*) override {
    return authenticator_.Check(*context, "Status");
  }

 private:
  RequestAuthenticator authenticator_;
};

class AuthenticationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    tcp_address_ = "127.0.0.1:" + std::to_string(testing::FreeTcpPort());
    socket_address_ = "unix:" + dir_.path() + "/granaryd.sock";
    builder.AddListeningPort(tcp_address_, grpc::InsecureServerCredentials());
    builder.AddListeningPort(socket_address_, grpc::InsecureServerCredentials());
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }

  void TearDown() override { server_->Shutdown(); }

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
  GuardedService service_{kToken};
  std::unique_ptr<grpc::Server> server_;
  std::string tcp_address_;
  std::string socket_address_;
};

TEST_F(AuthenticationTest, TcpCallsNeedTheTokenAndUnixSocketCallsDoNot) {
  EXPECT_EQ(CallStatus(tcp_address_, ""), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CallStatus(tcp_address_, "wrong-token-but-long-enough"),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CallStatus(tcp_address_, kToken), grpc::StatusCode::OK);
  EXPECT_EQ(CallStatus(socket_address_, ""), grpc::StatusCode::OK);
}

TEST(RequestAuthenticator, WithoutATokenEveryCallIsAllowed) {
  GuardedService open("");
  grpc::ServerBuilder builder;
  std::string address = "127.0.0.1:" + std::to_string(testing::FreeTcpPort());
  builder.AddListeningPort(address, grpc::InsecureServerCredentials());
  builder.RegisterService(&open);
  auto server = builder.BuildAndStart();
  auto channel = MakeChannel(address);
  grpc::ClientContext context;
  v1::StatusResponse response;
  EXPECT_TRUE(v1::Granary::NewStub(*channel)->Status(&context, {}, &response).ok());
  server->Shutdown();
}

TEST(ClusterToken, LoadsOneLineAndRejectsShortOrMissingFiles) {
  testing::TempDir dir;
  std::string path = dir.path() + "/token";
  std::ofstream(path) << "  " << kToken << "\n";
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
