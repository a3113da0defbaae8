#include "cache_server/access/request_authenticator.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/net/cluster_token.h"

namespace granary {

RequestAuthenticator::RequestAuthenticator(std::string cluster_token,
                                           const ConnectionTable* connections)
    : bearer_(cluster_token.empty() ? std::string() : BearerValue(cluster_token)),
      connections_(connections) {}

absl::StatusOr<Caller> RequestAuthenticator::Identify(const grpc::ServerContextBase& context) {
  const std::string peer = context.peer();
  int fd = -1;
  if (!absl::StartsWith(peer, "fd:") || !absl::SimpleAtoi(peer.substr(3), &fd)) {
    return absl::UnauthenticatedError(absl::StrCat(
        "the connection from ", peer, " was not accepted by granaryd, so its caller is unknown"));
  }
  absl::StatusOr<Caller> found = connections_->Find(fd);
  if (!found.ok()) {
    return absl::UnauthenticatedError(
        absl::StrCat("the caller on connection ", peer, " is unknown: ", found.status().message()));
  }
  Caller caller = *std::move(found);
  if (caller.channel == Caller::Channel::kUnixSocket) return caller;
  if (bearer_.empty()) {
    caller.cluster_member = true;
    return caller;
  }
  const auto& metadata = context.client_metadata();
  auto presented = metadata.find(kAuthorizationMetadata);
  caller.cluster_member =
      presented != metadata.end() &&
      TokensMatch(std::string_view(presented->second.data(), presented->second.size()), bearer_);
  if (!caller.cluster_member) {
    return absl::UnauthenticatedError(
        absl::StrCat(presented == metadata.end() ? "no cluster token" : "wrong cluster token",
                     " from ", caller.address,
                     ": this granaryd requires the cluster token on TCP connections "
                     "(--token-file or $GRANARY_TOKEN_FILE)"));
  }
  return caller;
}

absl::StatusOr<Caller> RequestAuthenticator::Authenticate(const grpc::ServerContextBase& context,
                                                          std::string_view method) {
  absl::StatusOr<Caller> caller = Identify(context);
  if (!caller.ok() && ShouldLog(context.peer())) {
    GRANARY_LOG(WARNING) << "rejected " << method << ": " << caller.status().message();
  }
  return caller;
}

bool RequestAuthenticator::ShouldLog(const std::string& peer) {
  auto now = std::chrono::steady_clock::now();
  MutexLock lock(&mutex_);
  if (last_logged_.size() > 4096) last_logged_.clear();
  auto [it, inserted] = last_logged_.try_emplace(peer, now);
  if (!inserted && now - it->second < std::chrono::seconds(1)) return false;
  it->second = now;
  return true;
}

}  // namespace granary
