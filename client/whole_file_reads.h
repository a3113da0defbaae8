// ReadWholeFiles reads a batch of files, each whole from offset 0 into a
// buffer of its own, with every read of the batch in flight at once
// (io_uring, up to kWholeFileQueueDepth): what lets a reader of many small
// files keep the disk's queue deep, where one open/read/close at a time
// keeps it at one. Where the kernel refuses a ring (seccomp, an old
// kernel), the files are read one by one with pread().
//
// Each file gets its own status: OK when `size` bytes were read, DATA_LOSS
// when the file ended sooner, or the read's error. Nothing is verified here:
// the descriptors are those granaryd hands out whole and verified
// (common/net/local_read_socket.h).
//
// Thread-safety: reentrant. Each thread keeps a ring of its own, made again
// in a process forked since it was made.
#ifndef GRANARY_CLIENT_WHOLE_FILE_READS_H_
#define GRANARY_CLIENT_WHOLE_FILE_READS_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"

namespace granary {

inline constexpr unsigned kWholeFileQueueDepth = 64;

struct WholeFileRead {
  int fd = -1;
  uint64_t size = 0;
  char* out = nullptr;  // `size` bytes.
  absl::Status status;  // Set by ReadWholeFiles.
};

void ReadWholeFiles(std::span<WholeFileRead> reads);

}  // namespace granary

#endif  // GRANARY_CLIENT_WHOLE_FILE_READS_H_
