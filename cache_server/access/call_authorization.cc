#include "cache_server/access/call_authorization.h"

#include <string>

#include "common/base/logging.h"
#include "common/base/status.h"

namespace granary {

void Audit(const Caller& caller, std::string_view change, const absl::Status& result) {
  GRANARY_LOG(INFO) << "audit: " << DescribeCaller(caller) << ": " << change << ": "
                    << (result.ok() ? std::string("OK") : result.ToString());
}

absl::StatusOr<Caller> AuthorizeCall(RequestAuthenticator& authenticator,
                                     const AccessPolicy& policy,
                                     const grpc::ServerContextBase& context,
                                     std::string_view method, AccessPolicy::Action action,
                                     std::string_view change) {
  GRANARY_ASSIGN_OR_RETURN(Caller caller, authenticator.Authenticate(context, method));
  absl::Status allowed = policy.Allow(caller, action, method);
  if (!allowed.ok()) {
    if (!change.empty()) Audit(caller, change, allowed);
    return allowed;
  }
  return caller;
}

}  // namespace granary
