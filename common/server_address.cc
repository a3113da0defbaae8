#include "common/server_address.h"

#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/absl_compat.h"
#include "common/defaults.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace granary {

std::string ResolveServerAddress(std::string_view explicit_address) {
  if (!explicit_address.empty()) return std::string(explicit_address);
  const char* from_env = std::getenv("GRANARY_SERVER");
  if (from_env != nullptr && from_env[0] != '\0') return from_env;
  return absl::StrCat("unix:", DefaultSocketPath());
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(std::string_view address) {
  if (absl::StartsWith(AsAbsl(address), "unix:")) {
    if (address.size() == 5) {
      return absl::InvalidArgumentError(absl::StrCat("server address '", AsAbsl(address),
                                                     "' names no socket path"));
    }
  } else {
    size_t colon = address.rfind(':');
    uint32_t port = 0;
    if (colon == std::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(AsAbsl(address.substr(colon + 1)), &port) || port == 0 || port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(
          "server address '", AsAbsl(address), "' is neither unix:PATH nor HOST:PORT"));
    }
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  return grpc::CreateCustomChannel(std::string(address), grpc::InsecureChannelCredentials(), args);
}

}  // namespace granary
