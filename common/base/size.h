// Human sizes: parses "4MiB", "200G", "1.5GiB", "4096" (plain bytes) and prints
// sizes the way the CLI shows them. Decimal suffixes (K, M, G, T, with or
// without "B") are powers of 1000; binary ones (KiB, MiB, GiB, TiB) of 1024.
//
// Thread-safety: pure functions.
#ifndef GRANARY_COMMON_BASE_SIZE_H_
#define GRANARY_COMMON_BASE_SIZE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace granary {

// Fails with INVALID_ARGUMENT naming the text when it is not a size or overflows.
absl::StatusOr<uint64_t> ParseSize(std::string_view text);

// "4.0 MiB", "512 B".
std::string FormatSize(uint64_t bytes);

}  // namespace granary

#endif  // GRANARY_COMMON_BASE_SIZE_H_
