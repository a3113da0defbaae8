#include "common/cluster_token.h"

#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/absl_compat.h"
#include "common/file_util.h"

namespace granary {

absl::StatusOr<std::string> LoadClusterToken(const std::string& path) {
  auto text = ReadFileToString(path, "cluster token file");
  if (!text.ok()) return text.status();
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.size() < kMinClusterTokenLength) {
    return absl::InvalidArgumentError(absl::StrCat("cluster token file ", path, " holds ",
                                                   token.size(), " characters; at least ",
                                                   kMinClusterTokenLength, " are required"));
  }
  if (token.find_first_of("\r\n") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster token file ", path, " must hold a single line"));
  }
  return token;
}

absl::StatusOr<std::string> ResolveClusterToken(std::string_view explicit_path) {
  std::string path(explicit_path);
  if (path.empty()) {
    const char* from_env = std::getenv("GRANARY_TOKEN_FILE");
    if (from_env == nullptr || from_env[0] == '\0') return std::string();
    path = from_env;
  }
  return LoadClusterToken(path);
}

std::string BearerValue(std::string_view token) { return absl::StrCat("Bearer ", AsAbsl(token)); }

bool TokensMatch(std::string_view presented, std::string_view expected) {
  // The length is not secret; the content is compared without early exit.
  if (presented.size() != expected.size()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < presented.size(); ++i) {
    difference |= static_cast<unsigned char>(presented[i] ^ expected[i]);
  }
  return difference == 0;
}

}  // namespace granary
