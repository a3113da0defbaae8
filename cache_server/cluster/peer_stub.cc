#include "cache_server/cluster/peer_stub.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/channel.h"

namespace granary {

absl::StatusOr<std::unique_ptr<v1::Granary::Stub>> ConnectToPeer(MemberClients& clients,
                                                                 const Member& peer) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = clients.Channel(peer);
  if (!channel.ok()) return channel.status();
  if (!(*channel)->WaitForConnected(std::chrono::system_clock::now() + kPeerConnectWait)) {
    return absl::UnavailableError(absl::StrCat("no connection to ", peer.id, " at ", peer.address,
                                               " within ", kPeerConnectWait.count(), " s"));
  }
  return v1::Granary::NewStub(*std::move(channel));
}

}  // namespace granary
