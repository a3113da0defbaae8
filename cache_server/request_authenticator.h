// RequestAuthenticator decides whether a call to granaryd may proceed. Calls
// over the Unix socket are local and authorised by the socket's file
// permissions. Calls over TCP must carry the cluster token when one is
// configured (common/cluster_token.h); others get UNAUTHENTICATED, and are
// logged with the peer's address and the method, at most once a second per
// peer host so that a misconfigured client cannot flood the log.
//
// Thread-safety: Check() may be called concurrently.
#ifndef GRANARY_CACHE_SERVER_REQUEST_AUTHENTICATOR_H_
#define GRANARY_CACHE_SERVER_REQUEST_AUTHENTICATOR_H_

#include <chrono>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "cache_server/caller.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace granary {

class RequestAuthenticator {
 public:
  // An empty token authorises every call.
  explicit RequestAuthenticator(std::string cluster_token);

  grpc::Status Check(const grpc::ServerContextBase& context, std::string_view method);

  absl::StatusOr<Caller> Identify(const grpc::ServerContextBase& context);

 private:
  bool ShouldLog(const std::string& peer);

  const std::string bearer_;
  std::mutex mutex_;
  absl::flat_hash_map<std::string, std::chrono::steady_clock::time_point> last_logged_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_REQUEST_AUTHENTICATOR_H_
