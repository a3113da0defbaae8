#include "client/member_clients.h"

#include "common/base/status.h"
#include "common/net/server_address.h"
#include "grpcpp/channel.h"

namespace granary {

MemberClients::MemberClients(Options options) : options_(std::move(options)) {}

MemberClients::~MemberClients() = default;

absl::StatusOr<MemberClients::Connections*> MemberClients::ConnectionsTo(const Member& member) {
  const std::string& address =
      member.id == options_.local_node_id && !options_.local_address.empty()
          ? options_.local_address
          : member.address;
  MutexLock lock(&mutex_);
  auto it = connections_.find(address);
  if (it != connections_.end()) return it->second.get();
  auto connections = std::make_unique<Connections>();
  for (int i = 0; i < kConnectionsPerMember; ++i) {
    GRANARY_ASSIGN_OR_RETURN(
        std::shared_ptr<grpc::Channel> channel,
        MakeChannel(address, options_.client.cluster_token, /*own_connection=*/true));
    connections->readers.push_back(DatasetClient::OverChannel(address, options_.client, channel));
    connections->channels.push_back(std::move(channel));
  }
  Connections* raw = connections.get();
  connections_.emplace(address, std::move(connections));
  return raw;
}

absl::StatusOr<const DatasetClient*> MemberClients::Reader(const Member& member) {
  GRANARY_ASSIGN_OR_RETURN(Connections * connections, ConnectionsTo(member));
  uint32_t turn = connections->next_reader.fetch_add(1, std::memory_order_relaxed);
  return connections->readers[turn % connections->readers.size()].get();
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MemberClients::Channel(const Member& member) {
  GRANARY_ASSIGN_OR_RETURN(Connections * connections, ConnectionsTo(member));
  return connections->channels.front();
}

bool MemberClients::IsSuspect(const std::string& member_id) {
  MutexLock lock(&mutex_);
  auto it = suspect_until_.find(member_id);
  return it != suspect_until_.end() && std::chrono::steady_clock::now() < it->second;
}

void MemberClients::MarkSuspect(const std::string& member_id) {
  MutexLock lock(&mutex_);
  suspect_until_[member_id] = std::chrono::steady_clock::now() + options_.suspect_period;
}

}  // namespace granary
