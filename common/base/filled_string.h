// FilledString: a string of a given length whose bytes a callback writes,
// for chunk-sized buffers read from a file or a socket. The bytes are not
// zeroed first: zeroing a 4 MiB chunk costs as much as a third of reading it
// from the page cache, and touches every page of fresh memory once more.
//
// Thread-safety: a free function; `fill` runs on the calling thread.
#ifndef GRANARY_COMMON_BASE_FILLED_STRING_H_
#define GRANARY_COMMON_BASE_FILLED_STRING_H_

#include <cstddef>
#include <span>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

namespace granary {

// The `length` bytes that `fill` writes into the span it is given (all of
// them, or it fails); its error if it fails.
absl::StatusOr<std::string> FilledString(size_t length,
                                         absl::FunctionRef<absl::Status(std::span<char>)> fill);

// A string of `length` bytes left as they were (not zeroed), for a caller
// that writes every one of them before any is read: buffers filled by reads
// made at once.
std::string UnzeroedString(size_t length);

}  // namespace granary

#endif  // GRANARY_COMMON_BASE_FILLED_STRING_H_
