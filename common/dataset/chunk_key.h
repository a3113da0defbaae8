// ChunkKey names one chunk: a fixed-size piece of one file of one dataset
// version. Its encoding is the store index's key: 20 bytes, big-endian, so that
// the chunks of one version, and of one file inside it, sort together and can be
// range-scanned or range-deleted.
//
// Thread-safety: a value type; distinct objects need no synchronisation.
#ifndef GRANARY_COMMON_DATASET_CHUNK_KEY_H_
#define GRANARY_COMMON_DATASET_CHUNK_KEY_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace granary {

namespace v1 {
class ChunkKey;
}  // namespace v1

struct ChunkKey {
  uint64_t dataset_version = 0;
  uint64_t file_id = 0;
  uint32_t chunk_index = 0;

  static constexpr size_t kEncodedSize = 20;

  // The 20-byte index key.
  std::string Encode() const;
  // The same bytes into `out`, without allocating (hot paths).
  void EncodeTo(char (&out)[kEncodedSize]) const;
  // Fails with INVALID_ARGUMENT unless `encoded` is exactly kEncodedSize bytes.
  static absl::StatusOr<ChunkKey> Decode(std::string_view encoded);
  // The 8-byte prefix shared by every chunk of `dataset_version`.
  static std::string VersionPrefix(uint64_t dataset_version);

  // "v<16 hex>/f<file>/c<chunk>", for logs and errors.
  std::string ToString() const;

  // As requests carry it.
  void ToProto(v1::ChunkKey* out) const;
  static ChunkKey FromProto(const v1::ChunkKey& key);

  friend bool operator==(const ChunkKey&, const ChunkKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const ChunkKey& k) {
    return H::combine(std::move(h), k.dataset_version, k.file_id, k.chunk_index);
  }
};

// A dataset version as printed to users: 16 lowercase hex digits.
std::string FormatVersion(uint64_t version);
absl::StatusOr<uint64_t> ParseVersion(std::string_view text);

}  // namespace granary

#endif  // GRANARY_COMMON_DATASET_CHUNK_KEY_H_
