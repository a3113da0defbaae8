// HugePageAllocator: a std::allocator for large, randomly accessed tables (the
// placement ring). Allocations of 2 MiB or more are 2 MiB-aligned and advised
// to use transparent huge pages, so a random lookup costs a cache miss instead
// of a cache miss plus a TLB miss. Smaller ones come from operator new, aligned
// as T asks (a cache line for the ring's lines).
//
// Thread-safety: stateless; safe from any thread.
#ifndef GRANARY_COMMON_HUGE_PAGE_ALLOCATOR_H_
#define GRANARY_COMMON_HUGE_PAGE_ALLOCATOR_H_

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <new>

namespace granary {

template <typename T>
class HugePageAllocator {
 public:
  using value_type = T;
  static constexpr size_t kHugePage = size_t{2} << 20;

  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}

  T* allocate(size_t count) {
    size_t bytes = count * sizeof(T);
    if (bytes < kHugePage) {
      return static_cast<T*>(::operator new (bytes, std::align_val_t{alignof(T)}));
    }
    size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* memory = std::aligned_alloc(kHugePage, rounded);
    if (memory == nullptr) throw std::bad_alloc();
    ::madvise(memory, rounded, MADV_HUGEPAGE);
    return static_cast<T*>(memory);
  }

  void deallocate(T* pointer, size_t count) {
    if (count * sizeof(T) < kHugePage) {
      ::operator delete (pointer, std::align_val_t{alignof(T)});
    } else {
      std::free(pointer);
    }
  }

  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

}  // namespace granary

#endif  // GRANARY_COMMON_HUGE_PAGE_ALLOCATOR_H_
