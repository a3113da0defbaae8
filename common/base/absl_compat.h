// Debian's Abseil is built with its own absl::string_view rather than an alias
// of std::string_view, so the two do not convert implicitly. Granary's APIs take
// std::string_view; these bridge to Abseil's string functions and back.
//
// Thread-safety: pure functions.
#ifndef GRANARY_COMMON_BASE_ABSL_COMPAT_H_
#define GRANARY_COMMON_BASE_ABSL_COMPAT_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace granary {

inline absl::string_view AsAbsl(std::string_view text) { return {text.data(), text.size()}; }
inline std::string_view AsStd(absl::string_view text) { return {text.data(), text.size()}; }

}  // namespace granary

#endif  // GRANARY_COMMON_BASE_ABSL_COMPAT_H_
