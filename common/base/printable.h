// Printable() makes text a caller sent safe to echo in an error or a log
// line: bytes that are not printable ASCII become \xNN, and text over a bound
// is cut with a note of its full length, so that a 10 KB name or a name with
// control characters never floods a reply's metadata or forges a log line.
//
// Thread-safety: a pure function.
#ifndef GRANARY_COMMON_BASE_PRINTABLE_H_
#define GRANARY_COMMON_BASE_PRINTABLE_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace granary {

inline constexpr size_t kMaxEchoedBytes = 128;

std::string Printable(std::string_view text, size_t max_bytes = kMaxEchoedBytes);

}  // namespace granary

#endif  // GRANARY_COMMON_BASE_PRINTABLE_H_
