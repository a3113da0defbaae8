// How a gRPC service of granaryd admits a call: who made it
// (RequestAuthenticator) and whether they may (AccessPolicy); and the audit
// line every change leaves in the log, allowed or refused: who, what, and
// the result.
//
// Thread-safety: free functions over thread-safe parts.
#ifndef GRANARY_CACHE_SERVER_ACCESS_CALL_AUTHORIZATION_H_
#define GRANARY_CACHE_SERVER_ACCESS_CALL_AUTHORIZATION_H_

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache_server/access/access_policy.h"
#include "cache_server/access/caller.h"
#include "cache_server/access/request_authenticator.h"
#include "grpcpp/server_context.h"

namespace granary {

// One audit line for `change` by `caller` with its `result`.
void Audit(const Caller& caller, std::string_view change, const absl::Status& result);

// Who made the call of `context`, if they may make `method` as `action`. A
// refused change (`change` non-empty) is audited.
absl::StatusOr<Caller> AuthorizeCall(RequestAuthenticator& authenticator,
                                     const AccessPolicy& policy,
                                     const grpc::ServerContextBase& context,
                                     std::string_view method, AccessPolicy::Action action,
                                     std::string_view change = {});

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_ACCESS_CALL_AUTHORIZATION_H_
