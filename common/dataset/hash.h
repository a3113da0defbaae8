// XXH3 checksums: every chunk is checked with XXH3-64 when it is read from NVMe,
// and dataset versions are XXH3-64 hashes of their manifests.
//
// Thread-safety: Xxh3 is a free function; Xxh3Stream is not thread-safe.
#ifndef GRANARY_COMMON_DATASET_HASH_H_
#define GRANARY_COMMON_DATASET_HASH_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace granary {

uint64_t Xxh3(const void* data, size_t length);
inline uint64_t Xxh3(std::string_view data) { return Xxh3(data.data(), data.size()); }

// Incremental XXH3-64: Update() over pieces gives the same value as Xxh3() over
// their concatenation.
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;

  void Update(const void* data, size_t length);
  void Update(std::string_view data) { Update(data.data(), data.size()); }
  // Appends a fixed-width integer, so that field boundaries are unambiguous.
  void UpdateU64(uint64_t value);
  uint64_t Digest() const;

 private:
  void* state_;  // XXH3_state_t, kept out of this header.
};

}  // namespace granary

#endif  // GRANARY_COMMON_DATASET_HASH_H_
