// The cluster token authenticates TCP traffic between Granary processes: every
// call carries "authorization: Bearer <token>" and a server configured with a
// token answers any TCP call without it with UNAUTHENTICATED. Unix-socket
// clients are local and are authorised by the socket file's permissions.
//
// The token lives in a file readable only by its owner (one line; surrounding
// whitespace ignored), given to granaryd as cluster_token_file and to clients
// as --token-file or $GRANARY_TOKEN_FILE. A token anyone can guess protects
// nothing, so a file is refused when its group or others may read it, when it
// holds a known placeholder, or when its token carries under
// kMinClusterTokenBits (estimated from its length and the classes of
// characters it uses; a token of few distinct characters is refused outright).
//
// Thread-safety: pure functions.
#ifndef GRANARY_COMMON_NET_CLUSTER_TOKEN_H_
#define GRANARY_COMMON_NET_CLUSTER_TOKEN_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace granary {

inline constexpr char kAuthorizationMetadata[] = "authorization";
inline constexpr double kMinClusterTokenBits = 128;
inline constexpr size_t kMinClusterTokenDistinctCharacters = 8;

// Reads the token from `path`. PERMISSION_DENIED naming the file and the fix
// when its group or others may read it; INVALID_ARGUMENT naming the file and
// the rule when it holds more than one line, a placeholder, or a token too
// weak by the rules above; the read errors of ReadFileToString otherwise.
absl::StatusOr<std::string> LoadClusterToken(const std::string& path);

// OK when `token` is strong enough by the rules above; otherwise
// INVALID_ARGUMENT starting with `origin` and naming the rule.
absl::Status CheckClusterTokenStrength(std::string_view token, std::string_view origin);

// `explicit_path` if non-empty, else $GRANARY_TOKEN_FILE; the token read from
// it, or "" when neither names a file.
absl::StatusOr<std::string> ResolveClusterToken(std::string_view explicit_path);

// "Bearer <token>".
std::string BearerValue(std::string_view token);

// Compares in time independent of where two equally long tokens differ.
bool TokensMatch(std::string_view presented, std::string_view expected);

}  // namespace granary

#endif  // GRANARY_COMMON_NET_CLUSTER_TOKEN_H_
