#include "cache_server/cluster/peer_stub.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/net/server_address.h"
#include "grpcpp/channel.h"

namespace granary {
namespace {

// How long a peer's host may take to accept a TCP connection when asked
// directly; a dead peer's host refuses at once.
constexpr std::chrono::milliseconds kAcceptWait{200};

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
      if (!ConnectTcp(address, kAcceptWait).ok()) return false;
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
