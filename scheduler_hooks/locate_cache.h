// A Locator (scheduler_hooks/locator.h) that reuses another's answers for a
// short time. kube-scheduler asks the extender to filter and then prioritize
// every pod, and a job's pods come in a burst that all name the same
// datasets: without reuse each decision would cost one Locate per dataset.
// Found answers and NOT_FOUND are reused for `ttl`; other errors are not, so
// a cluster that comes back is asked again at once.
//
// At most `max_entries` answers are kept: when full, expired ones are dropped,
// and if none has expired, all are.
//
// Thread-safety: the returned Locator may be called concurrently if `inner`
// may.
#ifndef GRANARY_SCHEDULER_HOOKS_LOCATE_CACHE_H_
#define GRANARY_SCHEDULER_HOOKS_LOCATE_CACHE_H_

#include <chrono>
#include <cstddef>

#include "scheduler_hooks/locator.h"

namespace granary::hooks {

// `inner` itself when `ttl` is zero.
Locator CachingLocator(Locator inner, std::chrono::milliseconds ttl, size_t max_entries);

}  // namespace granary::hooks

#endif  // GRANARY_SCHEDULER_HOOKS_LOCATE_CACHE_H_
