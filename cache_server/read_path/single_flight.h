// SingleFlight runs at most one call per key at a time: while a call for a key
// is in flight, other callers with the same key wait for it and share its
// result instead of running their own. granaryd uses it so that concurrent
// misses of one chunk cause exactly one source read.
//
// A flight may also be led from another thread than the one that started it:
// Join() hands the caller the flight's Lead, which it may pass on (a reader
// answered from part of a chunk leaves the rest of the fetch to a background
// thread); whoever holds the Lead must Finish() it.
//
// Thread-safety: Do() and Join() are safe to call concurrently. Value must be
// copyable; every waiter gets a copy of the leader's result.
#ifndef GRANARY_CACHE_SERVER_READ_PATH_SINGLE_FLIGHT_H_
#define GRANARY_CACHE_SERVER_READ_PATH_SINGLE_FLIGHT_H_

#include <functional>
#include <future>
#include <variant>

#include "absl/container/flat_hash_map.h"
#include "common/mutex.h"

namespace granary {

template <typename Key, typename Value>
class SingleFlight {
 public:
  // The duty to end a flight: Finish() gives every waiter the result and lets
  // the next call for the key start a new flight.
  class Lead {
   public:
    Lead(Lead&&) = default;
    Lead& operator=(Lead&&) = default;

    void Finish(Value value) && {
      {
        MutexLock lock(&flights_->mu_);
        flights_->in_flight_.erase(key_);
      }
      promise_.set_value(std::move(value));
    }

   private:
    friend class SingleFlight;
    Lead(SingleFlight* flights, Key key, std::promise<Value> promise)
        : flights_(flights), key_(std::move(key)), promise_(std::move(promise)) {}

    SingleFlight* flights_;
    Key key_;
    std::promise<Value> promise_;
  };

  // The flight for `key`: its Lead when none was in flight (the caller now
  // leads it), else the result the running flight will give.
  std::variant<Lead, std::shared_future<Value>> Join(const Key& key) {
    std::promise<Value> promise;
    MutexLock lock(&mu_);
    auto [it, inserted] = in_flight_.try_emplace(key);
    if (!inserted) return it->second;
    it->second = promise.get_future().share();
    return Lead(this, key, std::move(promise));
  }

  // Runs `call` unless a call for `key` is in flight, in which case waits for
  // it and returns its result. `*led` (if given) tells whether this caller ran
  // `call`.
  Value Do(const Key& key, const std::function<Value()>& call, bool* led = nullptr) {
    std::variant<Lead, std::shared_future<Value>> flight = Join(key);
    if (led != nullptr) *led = std::holds_alternative<Lead>(flight);
    if (auto* pending = std::get_if<std::shared_future<Value>>(&flight)) return pending->get();
    Value value = call();
    std::move(std::get<Lead>(flight)).Finish(value);
    return value;
  }

 private:
  Mutex mu_;
  absl::flat_hash_map<Key, std::shared_future<Value>> in_flight_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_READ_PATH_SINGLE_FLIGHT_H_
