#include "common/base/filled_string.h"

namespace granary {

absl::StatusOr<std::string> FilledString(size_t length,
                                         absl::FunctionRef<absl::Status(std::span<char>)> fill) {
  std::string data = UnzeroedString(length);
  absl::Status status = fill(std::span<char>(data));
  if (!status.ok()) return status;
  return data;
}

std::string UnzeroedString(size_t length) {
  std::string data;
  // Reserved first: GCC 12's resize_and_overwrite mis-sizes a string it has
  // to grow by less than twice (a 24-byte chunk came back as 30 bytes).
  data.reserve(length);
  data.resize_and_overwrite(length, [](char*, size_t size) { return size; });
  return data;
}

}  // namespace granary
