// IoEngine moves chunk bytes between memory and data files. A transfer is
// split into pieces (PieceBytes) that are in flight together (io_uring, up to
// the queue depth) or done one after another (pread), and a reader sees each
// piece, in file order, as soon as it has landed: the store checksums a chunk
// while the rest of it is still being read.
//
// Create() prefers io_uring and falls back to pread(2)/pwrite(2) when
// io_uring_queue_init fails (some hosts forbid io_uring), logging that once.
//
// Thread-safety: all methods are safe to call concurrently.
#ifndef GRANARY_CACHE_SERVER_STORE_IO_ENGINE_H_
#define GRANARY_CACHE_SERVER_STORE_IO_ENGINE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace granary::store {

// Pieces read through the page cache are small enough to still be in the CPU
// cache when they are checksummed. O_DIRECT pieces go to the device as they
// are, so they are larger: the device is the bottleneck, and it serves few
// large requests faster than many small ones. Chunks are not cut finer than
// that: each piece costs a system call or an io_uring request.
inline constexpr uint64_t kMaxBufferedPieceBytes = 256 << 10;
inline constexpr uint64_t kMaxDirectPieceBytes = 1 << 20;

inline constexpr uint64_t PieceBytes(bool direct) {
  return direct ? kMaxDirectPieceBytes : kMaxBufferedPieceBytes;
}

class IoEngine {
 public:
  // Called with each piece of a read, in file order.
  using PieceSink = absl::FunctionRef<void(const char* data, uint64_t length)>;

  // An io_uring engine with `queue_depth` entries per ring when `use_io_uring`
  // and the kernel allows it, else the pread engine.
  static std::unique_ptr<IoEngine> Create(bool use_io_uring, unsigned queue_depth);

  virtual ~IoEngine() = default;

  // Reads exactly dest.size() bytes at `offset` of `fd` into `dest`. `direct`
  // says `fd` was opened with O_DIRECT; then `dest`, `offset` and the size
  // must be block-aligned. DATA_LOSS if the file ends first.
  virtual absl::Status Read(int fd, bool direct, uint64_t offset, std::span<char> dest,
                            PieceSink on_piece) = 0;

  // Writes all of `src` at `offset` of `fd` (with the alignment rules of Read
  // when `direct`); RESOURCE_EXHAUSTED when the disk is full.
  virtual absl::Status Write(int fd, bool direct, uint64_t offset, std::span<const char> src) = 0;

  // "io_uring" or "pread".
  virtual std::string_view name() const = 0;
};

}  // namespace granary::store

#endif  // GRANARY_CACHE_SERVER_STORE_IO_ENGINE_H_
