// ParallelFor runs fn(0) ... fn(count - 1) on up to `max_threads` threads and
// returns when all have run: the fan-out of calls to many cluster members,
// where each call mostly waits on the network.
//
// Thread-safety: `fn` is called concurrently from several threads.
#ifndef GRANARY_COMMON_BASE_PARALLEL_FOR_H_
#define GRANARY_COMMON_BASE_PARALLEL_FOR_H_

#include <cstddef>
#include <functional>

namespace granary {

void ParallelFor(size_t count, size_t max_threads, const std::function<void(size_t)>& fn);

}  // namespace granary

#endif  // GRANARY_COMMON_BASE_PARALLEL_FOR_H_
