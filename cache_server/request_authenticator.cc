#include "cache_server/request_authenticator.h"

#include "absl/strings/match.h"
#include "common/absl_compat.h"
#include "common/cluster_token.h"
#include "common/logging.h"

namespace granary {

RequestAuthenticator::RequestAuthenticator(std::string cluster_token)
    : bearer_(cluster_token.empty() ? std::string() : BearerValue(cluster_token)) {}

grpc::Status RequestAuthenticator::Check(const grpc::ServerContextBase& context,
                                         std::string_view method) {
  if (bearer_.empty()) return grpc::Status::OK;
  std::string peer = context.peer();
  if (absl::StartsWith(peer, "unix:")) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  auto presented = metadata.find(kAuthorizationMetadata);
  if (presented != metadata.end() &&
      TokensMatch(std::string_view(presented->second.data(), presented->second.size()), bearer_)) {
    return grpc::Status::OK;
  }
  if (ShouldLog(peer)) {
    GRANARY_LOG(WARNING) << "rejected " << method << " from " << peer << ": "
                         << (presented == metadata.end() ? "no cluster token"
                                                         : "wrong cluster token");
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "this granaryd requires the cluster token on TCP connections "
                      "(--token-file or $GRANARY_TOKEN_FILE)");
}

absl::StatusOr<Caller> RequestAuthenticator::Identify(const grpc::ServerContextBase& context) {
  Caller caller;
  std::string peer = context.peer();
  if (absl::StartsWith(peer, "unix:")) {
    caller.channel = Caller::Channel::kUnixSocket;
    caller.credentials.uid = 0;
    return caller;
  }
  grpc::Status checked = Check(context, "call");
  if (!checked.ok()) return absl::UnauthenticatedError(checked.error_message());
  caller.address = peer;
  caller.cluster_member = true;
  return caller;
}

bool RequestAuthenticator::ShouldLog(const std::string& peer) {
  // "ipv4:10.0.0.7:51234": every connection has its own port; limit per host.
  std::string host = peer.substr(0, peer.rfind(':'));
  auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  if (last_logged_.size() > 4096) last_logged_.clear();
  auto [it, inserted] = last_logged_.try_emplace(host, now);
  if (!inserted && now - it->second < std::chrono::seconds(1)) return false;
  it->second = now;
  return true;
}

}  // namespace granary
