#include "cache_server/cluster/peer_stub.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/http.h"
#include "common/unique_fd.h"
#include "grpcpp/channel.h"

namespace granary {
namespace {

// How long a peer's host may take to accept a TCP connection when asked
// directly; a dead peer's host refuses at once.
constexpr std::chrono::milliseconds kAcceptWait{200};

// Whether something accepts a TCP connection at `address` (HOST:PORT) within
// kAcceptWait.
bool AcceptsConnections(const std::string& address) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(address, &host, &port).ok()) return false;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return false;
  bool accepted = false;
  for (addrinfo* candidate = found; candidate != nullptr && !accepted;
       candidate = candidate->ai_next) {
    UniqueFd fd(::socket(candidate->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) continue;
    if (::connect(fd.get(), candidate->ai_addr, candidate->ai_addrlen) == 0) {
      accepted = true;
    } else if (errno == EINPROGRESS) {
      pollfd connecting{fd.get(), POLLOUT, 0};
      int error = 0;
      socklen_t length = sizeof(error);
      accepted = ::poll(&connecting, 1, static_cast<int>(kAcceptWait.count())) == 1 &&
                 ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0;
    }
  }
  ::freeaddrinfo(found);
  return accepted;
}

// Whether `channel`, to the peer at `address`, is connected by `deadline`.
// With `refused_is_down`, a channel that failed earlier gets one fresh
// attempt at once (not after gRPC's reconnection backoff: the peer may have
// come back since), and is given up at once unless the peer's host accepts
// connections: gRPC reports TRANSIENT_FAILURE until an attempt succeeds, so
// the channel cannot tell a dead peer from one that has just restarted and
// is slow to answer the handshake (a loaded machine), which has until
// `deadline`.
bool WaitUntilConnected(grpc::Channel& channel, const std::string& address,
                        std::chrono::system_clock::time_point deadline, bool refused_is_down) {
  bool retried = false;
  grpc_connectivity_state state = channel.GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_SHUTDOWN) return false;
    if (refused_is_down && state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
      if (retried) return false;
      retried = true;
      grpc::experimental::ChannelResetConnectionBackoff(&channel);
      if (!AcceptsConnections(address)) return false;
    }
    if (!channel.WaitForStateChange(state, deadline)) return false;
    state = channel.GetState(/*try_to_connect=*/true);
  }
  return true;
}

absl::StatusOr<std::unique_ptr<v1::Granary::Stub>> Connect(
    MemberClients& clients, const Member& peer, std::chrono::system_clock::time_point deadline,
    bool refused_is_down) {
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = clients.Channel(peer);
  if (!channel.ok()) return channel.status();
  if (!WaitUntilConnected(**channel, peer.address, deadline, refused_is_down)) {
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - started);
    return absl::UnavailableError(absl::StrCat("no connection to ", peer.id, " at ", peer.address,
                                               " within ", waited.count(), " ms"));
  }
  return v1::Granary::NewStub(*std::move(channel));
}

}  // namespace

absl::StatusOr<std::unique_ptr<v1::Granary::Stub>> ConnectToPeer(
    MemberClients& clients, const Member& peer, std::chrono::system_clock::time_point deadline) {
  return Connect(clients, peer, deadline, /*refused_is_down=*/false);
}

absl::StatusOr<std::unique_ptr<v1::Granary::Stub>> ConnectToPeerUnlessRefused(
    MemberClients& clients, const Member& peer, std::chrono::system_clock::time_point deadline) {
  return Connect(clients, peer, deadline, /*refused_is_down=*/true);
}

}  // namespace granary
