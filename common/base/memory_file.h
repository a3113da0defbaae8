// MemoryFile is a file that lives in memory only (a memfd), handed to another
// process: granaryd fills one with the bytes of a source file it has just
// read, for granary-fuse to pass through to the kernel while the bytes are
// stored behind the answer; granary-fuse shares its open journal with its
// connection keeper in one. Seals make a promise the receiver can check
// (HasSeals) rather than trust: a file sealed against writing, growing and
// shrinking reads exactly the bytes written before, and one sealed against
// resizing never faults a mapping of it.
//
// The memory is the kernel's (shmem) and is freed when the last descriptor,
// mapping and backing-file reference to it go; who holds it decides how long
// it lives, so holders bound how many they keep.
//
// Thread-safety: one object is not shared between threads; HasSeals is
// reentrant.
#ifndef GRANARY_COMMON_BASE_MEMORY_FILE_H_
#define GRANARY_COMMON_BASE_MEMORY_FILE_H_

#include <fcntl.h>

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/base/unique_fd.h"

namespace granary {

class MemoryFile {
 public:
  // Seals that leave the bytes as they are: no write, no resize.
  static constexpr int kUnchangeable = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK;
  // Seals that leave the size as it is.
  static constexpr int kFixedSize = F_SEAL_GROW | F_SEAL_SHRINK;

  // A file of `size` zero bytes; `name` shows in /proc/PID/fd as
  // "/memfd:NAME".
  static absl::StatusOr<MemoryFile> Create(const char* name, uint64_t size);

  MemoryFile(MemoryFile&&) = default;
  MemoryFile& operator=(MemoryFile&&) = default;

  int fd() const { return fd_.get(); }

  // Writes `bytes` at `offset`; OUT_OF_RANGE past the size given to Create().
  absl::Status Write(uint64_t offset, std::string_view bytes);

  // Adds `seals` (F_SEAL_*) for good.
  absl::Status Seal(int seals);

  // Gives up the descriptor.
  UniqueFd Release() && { return std::move(fd_); }

  // Whether the memory file open as `fd` carries every seal of `seals`.
  static bool HasSeals(int fd, int seals);

 private:
  MemoryFile(UniqueFd fd, uint64_t size) : fd_(std::move(fd)), size_(size) {}

  UniqueFd fd_;
  uint64_t size_;
};

}  // namespace granary

#endif  // GRANARY_COMMON_BASE_MEMORY_FILE_H_
