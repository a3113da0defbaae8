// Server addresses as users write them, and gRPC channels to them.
//   "unix:/run/granary/granaryd.sock"  a Unix socket
//   "127.0.0.1:7070", "node7:7070"     TCP
// Without an explicit address, clients use $GRANARY_SERVER, else the local
// server's default socket (common/net/defaults.h).
//
// Thread-safety: pure functions; channels are thread-safe.
#ifndef GRANARY_COMMON_NET_SERVER_ADDRESS_H_
#define GRANARY_COMMON_NET_SERVER_ADDRESS_H_

#include <sys/un.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/base/unique_fd.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace granary {

// Largest gRPC message any Granary endpoint sends or accepts: a 64 MiB chunk
// plus framing.
inline constexpr int kMaxMessageBytes = 72 << 20;

// The address of the Unix socket at `path`; INVALID_ARGUMENT naming it when
// it is too long for one.
absl::StatusOr<sockaddr_un> UnixSocketAddress(std::string_view path);

// Splits "HOST:PORT" ("[::1]:7070" gives "::1"); fails with INVALID_ARGUMENT
// naming the text otherwise.
absl::Status SplitHostPort(std::string_view host_port, std::string* host, int* port);

// A blocking TCP socket connected to "HOST:PORT" within `timeout` (each
// address the host resolves to is tried in turn). UNAVAILABLE naming the
// address and why when none accepts; INVALID_ARGUMENT for a malformed one.
absl::StatusOr<UniqueFd> ConnectTcp(std::string_view host_port, std::chrono::milliseconds timeout);

// `explicit_address` if non-empty, else $GRANARY_SERVER, else
// "unix:" + DefaultClientSocketPath() (common/net/defaults.h).
std::string ResolveServerAddress(std::string_view explicit_address);

// Fails with INVALID_ARGUMENT naming the address unless it is "unix:PATH" or
// "HOST:PORT". With a non-empty `cluster_token` every call on the channel
// carries it (common/net/cluster_token.h). gRPC lets channels with the same
// address and settings share one connection; `own_connection` gives this
// channel a connection of its own, so that calls on several channels to one
// server do not queue on one HTTP/2 connection.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(std::string_view address,
                                                           std::string_view cluster_token = {},
                                                           bool own_connection = false);

}  // namespace granary

#endif  // GRANARY_COMMON_NET_SERVER_ADDRESS_H_
