// PrewarmLimits bounds what prewarms may cost this node, so that no caller
// exhausts its threads or its sources for the others (DESIGN.md, invariant
// 7): how many prewarms run at once, and with how many workers.
//
// A prewarm is admitted for one of two kinds of caller:
//   - a user bound by the config (a local caller who is not an
//     administrator): it runs with at most `parallelism` workers (fewer when
//     it asks fewer), and at most `max_prewarms_per_user` of one uid's and
//     `max_prewarms` of all such users' prewarms run at once;
//   - a trusted one (an administrator, or a cluster member carrying out its
//     share of a group prewarm the coordinator admitted): as many workers as
//     it asks, up to kMaxParallelism.
// Whoever asks, at most kMaxPrewarms prewarms run at once, with kMaxWorkers
// workers between them: a trusted prewarm asking more workers than are left
// gets those left. Over a limit, RESOURCE_EXHAUSTED names it, and the config
// option that sets it when one does.
//
// Thread-safety: all methods may be called concurrently; a Ticket is
// released by its destructor, on any thread.
#ifndef GRANARY_CACHE_SERVER_PREWARM_PREWARM_LIMITS_H_
#define GRANARY_CACHE_SERVER_PREWARM_PREWARM_LIMITS_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/base/mutex.h"

namespace granary {

class PrewarmLimits {
 public:
  // Hard ceilings that protect the process whatever the config says.
  static constexpr unsigned kMaxParallelism = 256;
  static constexpr unsigned kMaxPrewarms = 64;
  static constexpr unsigned kMaxWorkers = 1024;

  struct Config {
    unsigned parallelism = 8;  // Workers of a prewarm that asks none, and most a user gets.
    unsigned max_prewarms = 8;
    unsigned max_prewarms_per_user = 2;
  };

  // An admitted prewarm; gives back its place and workers when destroyed.
  class Ticket {
   public:
    Ticket(Ticket&& other) noexcept;
    Ticket& operator=(Ticket&&) = delete;
    ~Ticket();
    // How many workers the prewarm runs on each node.
    unsigned parallelism() const { return parallelism_; }

   private:
    friend class PrewarmLimits;
    Ticket(PrewarmLimits* limits, std::optional<uid_t> user, unsigned parallelism,
           unsigned reserved_workers)
        : limits_(limits),
          user_(user),
          parallelism_(parallelism),
          reserved_workers_(reserved_workers) {}
    PrewarmLimits* limits_;  // Null once moved from.
    std::optional<uid_t> user_;
    unsigned parallelism_;
    unsigned reserved_workers_;  // Counted against kMaxWorkers here.
  };

  explicit PrewarmLimits(Config config);

  // Admits a prewarm of `user` (nullopt: a trusted caller) asking
  // `parallelism` workers (0: the configured parallelism) to run `workers`
  // of them here: false for one that only coordinates the group's members
  // and runs none itself.
  absl::StatusOr<Ticket> Admit(std::optional<uid_t> user, unsigned parallelism, bool workers);

  const Config& config() const { return config_; }

 private:
  void Release(const Ticket& ticket);

  const Config config_;
  Mutex mu_;
  unsigned prewarms_ ABSL_GUARDED_BY(mu_) = 0;
  unsigned users_prewarms_ ABSL_GUARDED_BY(mu_) = 0;  // Of users bound by the config.
  unsigned workers_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uid_t, unsigned> per_user_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_PREWARM_PREWARM_LIMITS_H_
