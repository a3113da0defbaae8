// Small file helpers: whole files for the configuration readers, private
// directories for granaryd's data, and positioned reads that do not stop short.
//
// Thread-safety: pure functions.
#ifndef GRANARY_COMMON_BASE_FILE_UTIL_H_
#define GRANARY_COMMON_BASE_FILE_UTIL_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace granary {

// The whole content of `path`. Errors follow errno (NOT_FOUND,
// PERMISSION_DENIED, ...) and name `what` and the path, e.g.
// "members file /etc/granary/members.yaml: No such file or directory".
absl::StatusOr<std::string> ReadFileToString(const std::string& path, std::string_view what);

// Creates `path` (and missing parents) as a directory only its owner may
// enter (0700), and takes group and world access away from an existing one:
// what granaryd caches is readable by granaryd alone. Errors name `what` and
// the path.
absl::Status CreatePrivateDirectory(const std::string& path, std::string_view what);

// Reads from `fd` at `offset` until `out` is full or the file ends, and
// returns how many bytes were read (fewer than out.size() only at its end).
// Errors follow errno, with `context` as their message's start.
absl::StatusOr<size_t> PreadUntilFullOrEnd(int fd, uint64_t offset, std::span<char> out,
                                           std::string_view context);

}  // namespace granary

#endif  // GRANARY_COMMON_BASE_FILE_UTIL_H_
