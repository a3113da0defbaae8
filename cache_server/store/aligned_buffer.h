// AlignedBuffer is a heap buffer whose start and size are multiples of
// kBlockBytes, as O_DIRECT requires of the memory it reads into or writes from.
//
// Thread-safety: none; one owner at a time.
#ifndef GRANARY_CACHE_SERVER_STORE_ALIGNED_BUFFER_H_
#define GRANARY_CACHE_SERVER_STORE_ALIGNED_BUFFER_H_

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace granary::store {

// Chunks start at multiples of this inside their segments and occupy whole
// blocks, so that every chunk can be read with O_DIRECT.
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

}  // namespace granary::store

#endif  // GRANARY_CACHE_SERVER_STORE_ALIGNED_BUFFER_H_
