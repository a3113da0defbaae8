// Small file helpers shared by the configuration readers.
//
// Thread-safety: pure functions.
#ifndef GRANARY_COMMON_FILE_UTIL_H_
#define GRANARY_COMMON_FILE_UTIL_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace granary {

// The whole content of `path`. Errors follow errno (NOT_FOUND,
// PERMISSION_DENIED, ...) and name `what` and the path, e.g.
// "members file /etc/granary/members.yaml: No such file or directory".
absl::StatusOr<std::string> ReadFileToString(const std::string& path, std::string_view what);

}  // namespace granary

#endif  // GRANARY_COMMON_FILE_UTIL_H_
