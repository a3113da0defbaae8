#include "cache_server/cluster/peer_stub.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/channel.h"

namespace granary {

absl::StatusOr<std::unique_ptr<v1::Granary::Stub>> ConnectToPeer(
    MemberClients& clients, const Member& peer, std::chrono::system_clock::time_point deadline) {
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = clients.Channel(peer);
  if (!channel.ok()) return channel.status();
  if (!(*channel)->WaitForConnected(deadline)) {
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - started);
    return absl::UnavailableError(absl::StrCat("no connection to ", peer.id, " at ", peer.address,
                                               " within ", waited.count(), " ms"));
  }
  return v1::Granary::NewStub(*std::move(channel));
}

}  // namespace granary
