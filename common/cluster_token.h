// The cluster token authenticates TCP traffic between Granary processes: every
// call carries "authorization: Bearer <token>" and a server configured with a
// token answers any TCP call without it with UNAUTHENTICATED. Unix-socket
// clients are local and are authorised by the socket file's permissions.
//
// The token lives in a file readable only by the service account (one line;
// surrounding whitespace ignored), given to granaryd as cluster_token_file and
// to clients as --token-file or $GRANARY_TOKEN_FILE.
//
// Thread-safety: pure functions.
#ifndef GRANARY_COMMON_CLUSTER_TOKEN_H_
#define GRANARY_COMMON_CLUSTER_TOKEN_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace granary {

inline constexpr char kAuthorizationMetadata[] = "authorization";
inline constexpr size_t kMinClusterTokenLength = 16;

// Reads the token from `path`. INVALID_ARGUMENT naming the file when it holds
// fewer than kMinClusterTokenLength characters or more than one line; the read
// errors of ReadFileToString otherwise.
absl::StatusOr<std::string> LoadClusterToken(const std::string& path);

// `explicit_path` if non-empty, else $GRANARY_TOKEN_FILE; the token read from
// it, or "" when neither names a file.
absl::StatusOr<std::string> ResolveClusterToken(std::string_view explicit_path);

// "Bearer <token>".
std::string BearerValue(std::string_view token);

// Compares in time independent of where two equally long tokens differ.
bool TokensMatch(std::string_view presented, std::string_view expected);

}  // namespace granary

#endif  // GRANARY_COMMON_CLUSTER_TOKEN_H_
