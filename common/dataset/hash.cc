#include "common/dataset/hash.h"

#include <xxh_x86dispatch.h>
#include <xxhash.h>

namespace granary {

// The _dispatch variants pick AVX2/AVX-512 code at run time: several times
// faster than the SSE2 baseline the distribution builds for, same values.
uint64_t Xxh3(const void* data, size_t length) { return XXH3_64bits_dispatch(data, length); }

Xxh3Stream::Xxh3Stream() : state_(XXH3_createState()) {
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

Xxh3Stream::~Xxh3Stream() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Xxh3Stream::Update(const void* data, size_t length) {
  XXH3_64bits_update_dispatch(static_cast<XXH3_state_t*>(state_), data, length);
}

void Xxh3Stream::UpdateU64(uint64_t value) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(value >> (8 * i));
  Update(bytes, sizeof(bytes));
}

uint64_t Xxh3Stream::Digest() const {
  return XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_));
}

}  // namespace granary
