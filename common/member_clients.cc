#include "common/member_clients.h"

#include "common/server_address.h"
#include "common/status.h"
#include "grpcpp/channel.h"

namespace granary {

MemberClients::MemberClients(Options options) : options_(std::move(options)) {}

MemberClients::~MemberClients() = default;

absl::StatusOr<const MemberClients::Connection*> MemberClients::ConnectionTo(const Member& member) {
  const std::string& address =
      member.id == options_.local_node_id && !options_.local_address.empty()
          ? options_.local_address
          : member.address;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = connections_.find(address);
  if (it != connections_.end()) return it->second.get();
  GRANARY_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                           MakeChannel(address, options_.client.cluster_token));
  auto connection = std::make_unique<Connection>();
  connection->channel = channel;
  connection->reader = DatasetClient::OverChannel(address, options_.client, std::move(channel));
  const Connection* raw = connection.get();
  connections_.emplace(address, std::move(connection));
  return raw;
}

absl::StatusOr<const DatasetClient*> MemberClients::Reader(const Member& member) {
  GRANARY_ASSIGN_OR_RETURN(const Connection* connection, ConnectionTo(member));
  return connection->reader.get();
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MemberClients::Channel(const Member& member) {
  GRANARY_ASSIGN_OR_RETURN(const Connection* connection, ConnectionTo(member));
  return connection->channel;
}

bool MemberClients::IsSuspect(const std::string& member_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = suspect_until_.find(member_id);
  return it != suspect_until_.end() && std::chrono::steady_clock::now() < it->second;
}

void MemberClients::MarkSuspect(const std::string& member_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  suspect_until_[member_id] = std::chrono::steady_clock::now() + options_.suspect_period;
}

}  // namespace granary
