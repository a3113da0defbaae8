#include "common/net/server_address.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"
#include "common/net/cluster_token.h"
#include "common/net/defaults.h"
#include "grpc/grpc.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/client_interceptor.h"

namespace granary {

absl::Status SplitHostPort(std::string_view host_port, std::string* host, int* port) {
  size_t colon = host_port.rfind(':');
  if (colon == std::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(AsAbsl(host_port.substr(colon + 1)), port) || *port < 0 || *port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", AsAbsl(host_port), "' is not HOST:PORT"));
  }
  host->assign(host_port.substr(0, colon));
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  return absl::OkStatus();
}

namespace {

absl::Status ConnectError(std::string_view address, std::string_view why) {
  return absl::UnavailableError(
      absl::StrCat("cannot connect to ", AsAbsl(address), ": ", AsAbsl(why)));
}

}  // namespace

absl::StatusOr<UniqueFd> ConnectTcp(std::string_view host_port, std::chrono::milliseconds timeout) {
  std::string host;
  int port = 0;
  if (absl::Status split = SplitHostPort(host_port, &host, &port); !split.ok()) return split;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int error = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); error != 0) {
    return ConnectError(host_port, ::gai_strerror(error));
  }
  absl::Status last = ConnectError(host_port, "no address");
  UniqueFd connected;
  for (addrinfo* candidate = found; candidate != nullptr && !connected.valid();
       candidate = candidate->ai_next) {
    UniqueFd fd(::socket(candidate->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    int error = fd.valid() ? 0 : errno;
    if (fd.valid() && ::connect(fd.get(), candidate->ai_addr, candidate->ai_addrlen) != 0) {
      error = errno;
      if (error == EINPROGRESS) {
        pollfd connecting{fd.get(), POLLOUT, 0};
        socklen_t length = sizeof(error);
        if (::poll(&connecting, 1, static_cast<int>(timeout.count())) != 1) {
          error = ETIMEDOUT;
        } else if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
          error = errno;
        }
      }
    }
    if (error != 0) {
      last = ConnectError(host_port, std::strerror(error));
      continue;
    }
    connected = std::move(fd);
  }
  ::freeaddrinfo(found);
  if (!connected.valid()) return last;
  const int flags = ::fcntl(connected.get(), F_GETFL);
  ::fcntl(connected.get(), F_SETFL, flags & ~O_NONBLOCK);
  return connected;
}

std::string ResolveServerAddress(std::string_view explicit_address) {
  if (!explicit_address.empty()) return std::string(explicit_address);
  const char* from_env = std::getenv("GRANARY_SERVER");
  if (from_env != nullptr && from_env[0] != '\0') return from_env;
  return absl::StrCat("unix:", DefaultClientSocketPath());
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
