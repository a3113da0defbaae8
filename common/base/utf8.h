// Utf8CharacterLength reads names as UTF-8 where they are: Linux names are
// bytes, and what prints or serializes them must tell a character from a
// stray byte.
//
// Thread-safety: a pure function.
#ifndef GRANARY_COMMON_BASE_UTF8_H_
#define GRANARY_COMMON_BASE_UTF8_H_

#include <cstddef>
#include <string_view>

namespace granary {

// The length of the UTF-8 encoded character `bytes` begins with, or 0 if it
// does not begin with one (a stray or overlong byte, a surrogate, a truncated
// sequence).
size_t Utf8CharacterLength(std::string_view bytes);

}  // namespace granary

#endif  // GRANARY_COMMON_BASE_UTF8_H_
