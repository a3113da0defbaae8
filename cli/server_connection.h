// The CLI's connection to one granaryd: the resolved address (--server, else
// $GRANARY_SERVER, else the local default socket), a stub for the Granary
// service, and the wording of RPC errors, which must tell the user which server
// could not be reached rather than gRPC's generic text alone.
//
// Thread-safety: the stub is thread-safe; the object itself is immutable.
#ifndef GRANARY_CLI_SERVER_CONNECTION_H_
#define GRANARY_CLI_SERVER_CONNECTION_H_

#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/base/status.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "proto/granary.grpc.pb.h"

namespace granary::cli {

class ServerConnection {
 public:
  // `token_file` (else $GRANARY_TOKEN_FILE) holds the cluster token that TCP
  // servers of a cluster require (common/net/cluster_token.h); neither: no token.
  // Fails with INVALID_ARGUMENT when the address is malformed, or with the
  // token file's error. Connecting is lazy: an unreachable server shows up as
  // the first RPC's error.
  static absl::StatusOr<ServerConnection> Open(std::string_view explicit_address,
                                               std::string_view token_file);

  v1::Granary::Stub& stub() const { return *stub_; }
  // The channel, for stubs of granaryd's other services (Staging, Jobs).
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  const std::string& address() const { return address_; }

  // The absl::Status of a finished RPC, worded by NameServerInError.
  absl::Status Check(const grpc::Status& status) const;

  // Makes one unary RPC, e.g. Call(&v1::Granary::Stub::Locate, request), and
  // returns its response or its status worded by Check.
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(grpc::Status (v1::Granary::Stub::*method)(grpc::ClientContext*,
                                                                          const Request&,
                                                                          Response*),
                                const std::type_identity_t<Request>& request = {}) const {
    Response response;
    grpc::ClientContext context;
    GRANARY_RETURN_IF_ERROR(Check((stub_.get()->*method)(&context, request, &response)));
    return response;
  }

 private:
  ServerConnection(std::string address, std::shared_ptr<grpc::Channel> channel);

  std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Granary::Stub> stub_;
};

// `status` with the server's address in its message when the code means the
// server is down, unreachable or not answering (UNAVAILABLE,
// DEADLINE_EXCEEDED): gRPC's own text does not say which server it tried.
absl::Status NameServerInError(const absl::Status& status, std::string_view address);

}  // namespace granary::cli

#endif  // GRANARY_CLI_SERVER_CONNECTION_H_
