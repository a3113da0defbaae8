#include "cache_server/store/io_engine.h"

#include "cache_server/store/pread_io_engine.h"
#include "cache_server/store/uring_io_engine.h"
#include "common/base/logging.h"

namespace granary::store {

std::unique_ptr<IoEngine> IoEngine::Create(bool use_io_uring, unsigned queue_depth) {
  if (use_io_uring) {
    auto uring = NewUringIoEngine(queue_depth);
    if (uring.ok()) return *std::move(uring);
    GRANARY_LOG_FIRST_N(WARNING, 1) << "chunk store: io_uring unavailable ("
                                    << uring.status().message() << "); falling back to pread";
  }
  return NewPreadIoEngine();
}

}  // namespace granary::store
