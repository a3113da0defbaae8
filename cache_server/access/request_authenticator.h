// RequestAuthenticator says who made a call to granaryd (a Caller), from the
// connection the call came on. Every connection is accepted by granaryd
// itself (connection_acceptor.h), which recorded its caller in a
// ConnectionTable before gRPC served it; gRPC names such a peer "fd:N".
//
// - Unix socket: the credentials the kernel gave at connect().
// - TCP: the remote address; cluster_member when the call carries the
//   cluster token (common/net/cluster_token.h). When a token is configured, a TCP
//   call without it is UNAUTHENTICATED, logged with the peer's address and
//   the method at most once a second per connection (connections are
//   limited), so that a misconfigured client cannot flood the log. With no token (granaryd's
//   --insecure-tcp) every TCP caller counts as a member, as the operator chose.
// - A peer the table does not know is refused (UNAUTHENTICATED), never
//   trusted.
//
// Thread-safety: Identify() and Authenticate() may be called concurrently.
#ifndef GRANARY_CACHE_SERVER_ACCESS_REQUEST_AUTHENTICATOR_H_
#define GRANARY_CACHE_SERVER_ACCESS_REQUEST_AUTHENTICATOR_H_

#include <chrono>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "cache_server/access/caller.h"
#include "cache_server/access/connection_table.h"
#include "common/base/mutex.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace granary {

class RequestAuthenticator {
 public:
  // `connections` must outlive the authenticator. An empty token lets every
  // TCP call through as a cluster member.
  RequestAuthenticator(std::string cluster_token, const ConnectionTable* connections);

  // Who made the call of `context`; UNAUTHENTICATED naming the rule when the
  // caller is unknown or a TCP call lacks the cluster token.
  absl::StatusOr<Caller> Identify(const grpc::ServerContextBase& context);

  // Identify(), with a refusal of `method` logged (at most once a second per
  // peer, so that a misconfigured client cannot flood the log).
  absl::StatusOr<Caller> Authenticate(const grpc::ServerContextBase& context,
                                      std::string_view method);

 private:
  bool ShouldLog(const std::string& peer);

  const std::string bearer_;
  const ConnectionTable* const connections_;
  Mutex mutex_;
  absl::flat_hash_map<std::string, std::chrono::steady_clock::time_point> last_logged_
      ABSL_GUARDED_BY(mutex_);
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_ACCESS_REQUEST_AUTHENTICATOR_H_
