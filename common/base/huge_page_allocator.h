// HugePageAllocator: a std::allocator for large, randomly accessed tables (the
// placement ring, manifests). Allocations of 2 MiB or more are mappings of
// their own, 2 MiB-aligned and advised to use transparent huge pages, so a
// random lookup costs a cache miss instead of a cache miss plus a TLB miss,
// and freeing one returns its memory to the system at once. Smaller ones
// come from operator new, aligned as T asks (a cache line for the ring's
// lines).
//
// Tables are not taken from the heap: advice given to heap memory outlives
// the table, and khugepaged then collapses whatever the heap keeps there,
// free pages included, into huge pages that malloc_trim cannot return (a
// granaryd holding one manifest kept the pages of every manifest it had
// freed).
//
// Thread-safety: stateless; safe from any thread.
#ifndef GRANARY_COMMON_BASE_HUGE_PAGE_ALLOCATOR_H_
#define GRANARY_COMMON_BASE_HUGE_PAGE_ALLOCATOR_H_

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
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
    // A huge page more than needed, so that an aligned start lies inside;
    // the ends around it are unmapped again.
    const size_t rounded = Rounded(bytes);
    void* mapped = ::mmap(nullptr, rounded + kHugePage, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) throw std::bad_alloc();
    const uintptr_t start = reinterpret_cast<uintptr_t>(mapped);
    const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
    if (aligned > start) ::munmap(mapped, aligned - start);
    ::munmap(reinterpret_cast<void*>(aligned + rounded), start + kHugePage - aligned);
    ::madvise(reinterpret_cast<void*>(aligned), rounded, MADV_HUGEPAGE);
    return reinterpret_cast<T*>(aligned);
  }

  void deallocate(T* pointer, size_t count) {
    const size_t bytes = count * sizeof(T);
    if (bytes < kHugePage) {
      ::operator delete (pointer, std::align_val_t{alignof(T)});
    } else {
      ::munmap(pointer, Rounded(bytes));
    }
  }

  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }

 private:
  static size_t Rounded(size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }
};

}  // namespace granary

#endif  // GRANARY_COMMON_BASE_HUGE_PAGE_ALLOCATOR_H_
