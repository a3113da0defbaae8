// ConnectionBudget counts the connections of one kind that a server holds,
// by the remote host they come from, against two limits: per host and
// overall. A connection holds a Slot while it counts; the slot gives its
// place back when it is destroyed. A connection that finds no place left is
// closed by its caller at once, so that one kind of connection (those not
// yet authenticated, above all) never takes more than its share of a pool
// that others need.
//
// Thread-safety: Take() may be called concurrently; a Slot is used by one
// thread at a time and must not outlive its budget.
#ifndef GRANARY_CACHE_SERVER_ACCESS_CONNECTION_BUDGET_H_
#define GRANARY_CACHE_SERVER_ACCESS_CONNECTION_BUDGET_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/base/mutex.h"

namespace granary {

// The host of a TCP peer address as gRPC names it: "ipv4:10.0.0.7" of
// "ipv4:10.0.0.7:51234", "ipv6:[::1]" of "ipv6:[::1]:51234". Every
// connection of a host has its own port; per-host limits count by host.
std::string HostOf(std::string_view tcp_address);

class ConnectionBudget {
 public:
  struct Limits {
    uint32_t per_host = 0;
    uint32_t overall = 0;
  };

  // A place in the budget, given back when destroyed.
  class Slot {
   public:
    Slot(Slot&& other) noexcept : budget_(other.budget_), host_(std::move(other.host_)) {
      other.budget_ = nullptr;
    }
    Slot& operator=(Slot&&) = delete;
    Slot(const Slot&) = delete;
    ~Slot();

   private:
    friend class ConnectionBudget;
    Slot(ConnectionBudget* budget, std::string host) : budget_(budget), host_(std::move(host)) {}
    ConnectionBudget* budget_;
    std::string host_;
  };

  // `what` names the connections counted and `per_host_name` and
  // `overall_name` the limits (their config keys), for refusals.
  ConnectionBudget(std::string what, Limits limits, std::string per_host_name,
                   std::string overall_name)
      : what_(std::move(what)),
        limits_(limits),
        per_host_name_(std::move(per_host_name)),
        overall_name_(std::move(overall_name)) {}
  ConnectionBudget(const ConnectionBudget&) = delete;
  ConnectionBudget& operator=(const ConnectionBudget&) = delete;

  // A place for one more connection from `host`; RESOURCE_EXHAUSTED naming
  // the limit reached when there is none.
  absl::StatusOr<Slot> Take(const std::string& host);

  // Connections counted now.
  uint32_t held() const;

 private:
  void GiveBack(const std::string& host);

  const std::string what_;
  const Limits limits_;
  const std::string per_host_name_;
  const std::string overall_name_;
  mutable Mutex mutex_;
  absl::flat_hash_map<std::string, uint32_t> per_host_ ABSL_GUARDED_BY(mutex_);
  uint32_t overall_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_ACCESS_CONNECTION_BUDGET_H_
