// PreadIoEngine is the IoEngine of last resort: plain pread(2)/pwrite(2), one
// piece at a time, for hosts where io_uring is unavailable.
//
// Thread-safety: stateless; safe to call concurrently.
#ifndef GRANARY_CACHE_SERVER_STORE_PREAD_IO_ENGINE_H_
#define GRANARY_CACHE_SERVER_STORE_PREAD_IO_ENGINE_H_

#include <memory>

#include "cache_server/store/io_engine.h"

namespace granary::store {

std::unique_ptr<IoEngine> NewPreadIoEngine();

}  // namespace granary::store

#endif  // GRANARY_CACHE_SERVER_STORE_PREAD_IO_ENGINE_H_
