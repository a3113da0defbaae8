#include "common/base/heap_buffers.h"

#include <malloc.h>

#include <cstdlib>
#include <initializer_list>

namespace granary {

void KeepLargeBuffersInTheHeap() {
  for (const char* tuned : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"}) {
    if (std::getenv(tuned) != nullptr) return;
  }
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

}  // namespace granary
