#include "common/server_address.h"

#include <sys/socket.h>

#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/absl_compat.h"
#include "common/cluster_token.h"
#include "common/defaults.h"
#include "grpc/grpc.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/client_interceptor.h"

namespace granary {

std::string ResolveServerAddress(std::string_view explicit_address) {
  if (!explicit_address.empty()) return std::string(explicit_address);
  const char* from_env = std::getenv("GRANARY_SERVER");
  if (from_env != nullptr && from_env[0] != '\0') return from_env;
  return absl::StrCat("unix:", DefaultSocketPath());
}

namespace {

// Adds the cluster token to the initial metadata of every call.
class TokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* bearer) : bearer_(bearer) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kAuthorizationMetadata, *bearer_);
    }
    methods->Proceed();
  }

 private:
  const std::string* bearer_;
};

class TokenInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(std::string_view token) : bearer_(BearerValue(token)) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(&bearer_);
  }

 private:
  const std::string bearer_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(std::string_view address,
                                                           std::string_view cluster_token,
                                                           bool own_connection) {
  if (absl::StartsWith(AsAbsl(address), "unix:")) {
    if (address.size() == 5) {
      return absl::InvalidArgumentError(
          absl::StrCat("server address '", AsAbsl(address), "' names no socket path"));
    }
  } else {
    size_t colon = address.rfind(':');
    uint32_t port = 0;
    if (colon == std::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(AsAbsl(address.substr(colon + 1)), &port) || port == 0 || port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("server address '", AsAbsl(address),
                                                     "' is neither unix:PATH nor HOST:PORT"));
    }
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // gRPC's default reconnect backoff (1 s, growing to 120 s) would keep
  // failing calls to a peer long after it came back; a cluster reroutes
  // around dead nodes itself, so it retries a connection within a second or
  // two. (The minimum is also the timeout of one connection attempt, so it
  // stays long enough for a busy machine.)
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 2000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  // gRPC's BDP probing, which sizes the receive window from pings, held chunk
  // reads over loopback TCP to 0.06 x iperf3 while the same reads over the
  // Unix socket ran at 0.6; without it they run at 0.4-0.5 (bench/RESULTS.md,
  // remote chunk reads). A fixed 4 MiB window instead of the default made no
  // measurable difference.
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  if (own_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (cluster_token.empty()) {
    return grpc::CreateCustomChannel(std::string(address), grpc::InsecureChannelCredentials(),
                                     args);
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<TokenInterceptorFactory>(cluster_token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      std::string(address), grpc::InsecureChannelCredentials(), args, std::move(interceptors));
}

absl::StatusOr<sockaddr_un> UnixSocketAddress(std::string_view path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path ", AsAbsl(path), " is longer than ",
                                                   sizeof(address.sun_path) - 1, " bytes"));
  }
  path.copy(address.sun_path, path.size());
  return address;
}

}  // namespace granary
