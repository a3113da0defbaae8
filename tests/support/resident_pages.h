// ResidentPages says which pages of an open file the kernel's page cache
// holds (mincore on a read-only mapping), for tests of what reads and writes
// leave in it: the store's direct writes, granary-fuse's page-cache stores.
//
// Thread-safety: reentrant.
#ifndef GRANARY_TESTS_SUPPORT_RESIDENT_PAGES_H_
#define GRANARY_TESTS_SUPPORT_RESIDENT_PAGES_H_

#include <cstddef>
#include <vector>

namespace granary::testing {

// Whether each 4 KiB page of `fd`'s first `size` bytes is in the page cache
// (up to date); empty if the file cannot be mapped or asked (errno says why).
std::vector<bool> ResidentPages(int fd, size_t size);

}  // namespace granary::testing

#endif  // GRANARY_TESTS_SUPPORT_RESIDENT_PAGES_H_
