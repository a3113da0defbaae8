// MemoryFile is a file that lives in memory only (a memfd): granaryd fills
// one with the bytes of a source file it has just read, and hands it to
// granary-fuse for the kernel to serve (FUSE passthrough takes any regular
// file) while the bytes are stored in the cache behind the answer. Once
// sealed, nothing can write, grow, shrink or reseal it, so whoever holds it
// reads exactly the bytes written before the seal.
//
// The memory is the kernel's (shmem) and is freed when the last descriptor
// and the last backing-file reference to it go; who holds it decides how
// long it lives, so holders bound how many they keep (passthrough_files.h).
//
// Thread-safety: one object is not shared between threads.
#ifndef GRANARY_CACHE_SERVER_READ_PATH_MEMORY_FILE_H_
#define GRANARY_CACHE_SERVER_READ_PATH_MEMORY_FILE_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace granary {

class MemoryFile {
 public:
  // A file of `size` zero bytes; `name` shows in /proc/PID/fd as
  // "/memfd:NAME".
  static absl::StatusOr<MemoryFile> Create(const char* name, uint64_t size);

  MemoryFile(MemoryFile&&) = default;
  MemoryFile& operator=(MemoryFile&&) = default;

  // Writes `bytes` at `offset`; OUT_OF_RANGE past the size given to Create().
  absl::Status Write(uint64_t offset, std::string_view bytes);

  // Seals the file against every change and gives up its descriptor.
  absl::StatusOr<UniqueFd> Seal() &&;

 private:
  MemoryFile(UniqueFd fd, uint64_t size) : fd_(std::move(fd)), size_(size) {}

  UniqueFd fd_;
  uint64_t size_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_READ_PATH_MEMORY_FILE_H_
