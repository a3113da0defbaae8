// AlignedBuffer is a heap buffer whose start and size are multiples of
// kBlockBytes, as O_DIRECT requires of the memory it reads into or writes from.
// AlignedBufferPool keeps released buffers for reuse: a fresh multi-megabyte
// buffer costs a page fault per 4 KiB, which can take longer than the I/O.
//
// Thread-safety: an AlignedBuffer has one owner at a time; AlignedBufferPool
// is safe to use concurrently.
#ifndef GRANARY_CACHE_SERVER_STORE_ALIGNED_BUFFER_H_
#define GRANARY_CACHE_SERVER_STORE_ALIGNED_BUFFER_H_

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "common/base/mutex.h"

namespace granary::store {

// The unit of O_DIRECT transfers and of the store's disk accounting: a chunk
// occupies whole blocks of its data file.
inline constexpr uint64_t kBlockBytes = 4096;

inline constexpr uint64_t RoundUpToBlock(uint64_t bytes) {
  return (bytes + kBlockBytes - 1) / kBlockBytes * kBlockBytes;
}

class AlignedBuffer {
 public:
  // Holds RoundUpToBlock(bytes) bytes; throws std::bad_alloc like `new`.
  explicit AlignedBuffer(uint64_t bytes)
      : size_(RoundUpToBlock(bytes)),
        data_(
            static_cast<char*>(std::aligned_alloc(kBlockBytes, size_ == 0 ? kBlockBytes : size_))) {
    if (data_ == nullptr) throw std::bad_alloc();
  }

  char* data() { return data_.get(); }
  const char* data() const { return data_.get(); }
  uint64_t size() const { return size_; }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  uint64_t size_;
  std::unique_ptr<char, Free> data_;
};

class AlignedBufferPool {
 public:
  // Keeps at most `max_idle_bytes` of released buffers.
  explicit AlignedBufferPool(uint64_t max_idle_bytes) : max_idle_bytes_(max_idle_bytes) {}

  // The smallest idle buffer of at least `bytes`, or a new one.
  std::unique_ptr<AlignedBuffer> Take(uint64_t bytes);
  void Give(std::unique_ptr<AlignedBuffer> buffer);

 private:
  const uint64_t max_idle_bytes_;
  Mutex mu_;
  std::vector<std::unique_ptr<AlignedBuffer>> idle_ ABSL_GUARDED_BY(mu_);
  uint64_t idle_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace granary::store

#endif  // GRANARY_CACHE_SERVER_STORE_ALIGNED_BUFFER_H_
