// UringIoEngine runs data file I/O through io_uring: the pieces of a chunk are
// submitted in batches, up to the queue depth in flight at once, and handed to
// the reader in file order as they complete.
//
// Rings are not thread-safe, so the engine keeps a pool of them: each call
// borrows an idle ring (creating one when all are busy) and returns it, so
// concurrent callers never share a ring and a steady load creates no rings.
//
// Thread-safety: all methods are safe to call concurrently.
#ifndef GRANARY_CACHE_SERVER_STORE_URING_IO_ENGINE_H_
#define GRANARY_CACHE_SERVER_STORE_URING_IO_ENGINE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "cache_server/store/io_engine.h"

namespace granary::store {

// Fails with the error of io_uring_queue_init when the kernel refuses a ring.
absl::StatusOr<std::unique_ptr<IoEngine>> NewUringIoEngine(unsigned queue_depth);

}  // namespace granary::store

#endif  // GRANARY_CACHE_SERVER_STORE_URING_IO_ENGINE_H_
