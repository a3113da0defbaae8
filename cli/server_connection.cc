#include "cli/server_connection.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"
#include "common/base/status.h"
#include "common/net/cluster_token.h"
#include "common/net/server_address.h"
#include "grpcpp/channel.h"

namespace granary::cli {

ServerConnection::ServerConnection(std::string address, std::shared_ptr<grpc::Channel> channel)
    : address_(std::move(address)),
      channel_(std::move(channel)),
      stub_(v1::Granary::NewStub(channel_)) {}

absl::StatusOr<ServerConnection> ServerConnection::Open(std::string_view explicit_address,
                                                        std::string_view token_file) {
  std::string address = ResolveServerAddress(explicit_address);
  GRANARY_ASSIGN_OR_RETURN(std::string token, ResolveClusterToken(token_file));
  GRANARY_ASSIGN_OR_RETURN(auto channel, MakeChannel(address, token));
  return ServerConnection(std::move(address), std::move(channel));
}

absl::Status ServerConnection::Check(const grpc::Status& status) const {
  return NameServerInError(FromGrpcStatus(status), address_);
}

absl::Status NameServerInError(const absl::Status& status, std::string_view address) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
      return absl::UnavailableError(absl::StrCat(
          "granaryd at ", AsAbsl(address), " is unavailable (is it running?): ", status.message()));
    case absl::StatusCode::kDeadlineExceeded:
      return absl::DeadlineExceededError(absl::StrCat(
          "granaryd at ", AsAbsl(address), " did not answer in time: ", status.message()));
    default:
      return status;
  }
}

}  // namespace granary::cli
