#include "tests/support/resident_pages.h"

#include <sys/mman.h>

namespace granary::testing {

std::vector<bool> ResidentPages(int fd, size_t size) {
  void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (mapped == MAP_FAILED) return {};
  std::vector<unsigned char> flags((size + 4095) / 4096);
  std::vector<bool> resident;
  if (::mincore(mapped, size, flags.data()) == 0) {
    for (unsigned char flag : flags) resident.push_back((flag & 1) != 0);
  }
  ::munmap(mapped, size);
  return resident;
}

}  // namespace granary::testing
