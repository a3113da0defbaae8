// Integers as big-endian bytes, the form of the numbers in RocksDB keys:
// RocksDB orders keys bytewise, and big-endian numbers then sort as numbers do.
//
// Thread-safety: pure functions.
#ifndef GRANARY_COMMON_BASE_BIG_ENDIAN_H_
#define GRANARY_COMMON_BASE_BIG_ENDIAN_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace granary {

// Writes the low `bytes` bytes of `value` (at most 8) to out[0, bytes).
inline void PutBigEndian(uint64_t value, int bytes, char* out) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>(value >> (8 * (bytes - 1 - i)));
}

// Appends the low `bytes` bytes of `value` (at most 8) to `out`.
inline void AppendBigEndian(uint64_t value, int bytes, std::string* out) {
  const size_t at = out->size();
  out->resize(at + bytes);
  PutBigEndian(value, bytes, out->data() + at);
}

// The number the first `bytes` bytes of `in` (at most 8, and at most its
// size) hold.
inline uint64_t ReadBigEndian(std::string_view in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes && i < static_cast<int>(in.size()); ++i) {
    value = value << 8 | static_cast<uint8_t>(in[i]);
  }
  return value;
}

}  // namespace granary

#endif  // GRANARY_COMMON_BASE_BIG_ENDIAN_H_
