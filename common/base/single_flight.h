// SingleFlight runs at most one call per key at a time: while a call for a key
// is in flight, other callers with the same key wait for it and share its
// result instead of running their own. Concurrent misses of one chunk so cause
// one fetch: from the source in granaryd, from the cluster in granary-fuse.
// Nothing is kept once a call ends: the next caller of the key runs it again
// (what to remember, and for how long, is the caller's cache's business).
//
// Thread-safety: every method may be called concurrently. `call` runs on the
// calling thread without the SingleFlight's lock held. Value must be copyable;
// every waiter gets a copy of the leader's result.
#ifndef GRANARY_COMMON_BASE_SINGLE_FLIGHT_H_
#define GRANARY_COMMON_BASE_SINGLE_FLIGHT_H_

#include <functional>
#include <future>

#include "absl/container/flat_hash_map.h"
#include "common/base/mutex.h"

namespace granary {

template <typename Key, typename Value>
class SingleFlight {
 public:
  // Runs `call` unless a call for `key` is in flight, in which case waits for
  // it and returns its result. `*led` (if given) tells whether this caller ran
  // `call`.
  Value Do(const Key& key, const std::function<Value()>& call, bool* led = nullptr) {
    std::promise<Value> promise;
    std::shared_future<Value> pending;
    bool leader = false;
    {
      MutexLock lock(&mu_);
      auto [it, inserted] = in_flight_.try_emplace(key);
      if (inserted) it->second.result = promise.get_future().share();
      if (!inserted) ++it->second.waiters;
      pending = it->second.result;
      leader = inserted;
    }
    if (led != nullptr) *led = leader;
    if (!leader) return pending.get();
    Value value = call();
    {
      MutexLock lock(&mu_);
      in_flight_.erase(key);
    }
    promise.set_value(value);
    return value;
  }

  // True while a call for `key` runs.
  bool InFlight(const Key& key) const {
    MutexLock lock(&mu_);
    return in_flight_.contains(key);
  }

  // How many callers wait for the call for `key` in flight (0 when none is).
  int Waiters(const Key& key) const {
    MutexLock lock(&mu_);
    auto it = in_flight_.find(key);
    return it == in_flight_.end() ? 0 : it->second.waiters;
  }

 private:
  struct Flight {
    std::shared_future<Value> result;
    int waiters = 0;
  };

  mutable Mutex mu_;
  absl::flat_hash_map<Key, Flight> in_flight_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_COMMON_BASE_SINGLE_FLIGHT_H_
