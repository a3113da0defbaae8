// SingleFlight runs at most one call per key at a time: while a call for a key
// is in flight, other callers with the same key wait for it and share its
// result instead of running their own. granaryd uses it so that concurrent
// misses of one chunk cause exactly one source read.
//
// Thread-safety: Do() is safe to call concurrently. Value must be copyable;
// every waiter gets a copy of the leader's result.
#ifndef GRANARY_CACHE_SERVER_READ_PATH_SINGLE_FLIGHT_H_
#define GRANARY_CACHE_SERVER_READ_PATH_SINGLE_FLIGHT_H_

#include <functional>
#include <future>

#include "absl/container/flat_hash_map.h"
#include "common/mutex.h"

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
      if (inserted) it->second = promise.get_future().share();
      pending = it->second;
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

 private:
  Mutex mu_;
  absl::flat_hash_map<Key, std::shared_future<Value>> in_flight_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_READ_PATH_SINGLE_FLIGHT_H_
