#include "cache_server/cluster/peer_stub.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "grpcpp/channel.h"

namespace granary {
namespace {

// How long a fresh attempt to reach a peer whose channel failed before may
// take to start. gRPC keeps such a channel in TRANSIENT_FAILURE until it
// connects, so a failed attempt is not seen; the attempt starts at once
// when the backoff is reset.
constexpr std::chrono::milliseconds kFreshAttemptStart{200};

// Whether `channel` is connected by `deadline`. With `refused_is_down`, a
// channel that failed earlier gets one fresh attempt at once (not after
// gRPC's reconnection backoff: the peer may have come back since) and is
// given up when that attempt fails too: a dead peer refuses at once. An
// attempt still connecting has until `deadline`, since a peer that has just
// started (or a loaded machine) may take a while to answer the handshake.
bool WaitUntilConnected(grpc::Channel& channel, std::chrono::system_clock::time_point deadline,
                        bool refused_is_down) {
  bool retried = false;
  grpc_connectivity_state state = channel.GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_SHUTDOWN) return false;
    auto wait_until = deadline;
    if (refused_is_down && state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
      if (retried) return false;
      retried = true;
      grpc::experimental::ChannelResetConnectionBackoff(&channel);
      wait_until = std::min(deadline, std::chrono::system_clock::now() + kFreshAttemptStart);
    }
    if (!channel.WaitForStateChange(state, wait_until)) return false;
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
  if (!WaitUntilConnected(**channel, deadline, refused_is_down)) {
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
