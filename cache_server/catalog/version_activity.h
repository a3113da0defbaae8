// VersionActivity tells the chunk store which dataset versions running jobs
// use, so that its eviction drops unused datasets first. A version becomes
// active when it is read or prewarmed and returns to inactive once nothing has
// touched it for `idle_after`.
//
// It also remembers when each version was last reported kept by a mount on
// this node (granary-fuse's use reports list the versions it still shows or
// has files open of), so that an older version is released only once no
// mount keeps it (VersionReleaser). Reads do not keep a version: a reader
// of a version refreshed away would otherwise keep its permissions alive.
// Being kept by a mount does not make a version active: a mount shows every
// dataset, and eviction must still tell the datasets jobs read.
//
// A version held for a job (HoldTable) is held in the store
// (VersionState::kHeld) for as long as it is held, touched or not: neither
// eviction mode reclaims it for another dataset's chunks. Once released, it
// is active, and demoted `idle_after` after its last touch, as any other.
//
// A version pinned in the store stays pinned: touches, holds and demotions
// leave its state alone.
//
// Thread-safety: all methods are safe to call concurrently; a background
// thread, stopped by the destructor, does the demotions.
#ifndef GRANARY_CACHE_SERVER_CATALOG_VERSION_ACTIVITY_H_
#define GRANARY_CACHE_SERVER_CATALOG_VERSION_ACTIVITY_H_

#include <chrono>
#include <cstdint>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "cache_server/store/chunk_store.h"
#include "common/base/mutex.h"

namespace granary {

class VersionActivity {
 public:
  VersionActivity(store::ChunkStore* store, std::chrono::milliseconds idle_after);
  ~VersionActivity();
  VersionActivity(const VersionActivity&) = delete;
  VersionActivity& operator=(const VersionActivity&) = delete;

  // Marks `version` used now; it becomes active if it was not.
  void Touch(uint64_t version);
  // Marks `version` kept by a mount now.
  void Keep(uint64_t version);
  // Whether a mount reported `version` kept within the last `window`.
  bool KeptWithin(uint64_t version, std::chrono::milliseconds window);
  // Whether `version` was touched (read or prewarmed) within the last `window`.
  bool TouchedWithin(uint64_t version, std::chrono::milliseconds window);
  // Holds `version` for a job: it is active until released as many times.
  void Hold(uint64_t version);
  void Release(uint64_t version);
  // Stops tracking a removed version.
  void Forget(uint64_t version);

 private:
  using Clock = std::chrono::steady_clock;
  struct Use {
    Clock::time_point last_touch;  // Read or prewarmed; what `active` follows.
    Clock::time_point last_keep;   // Reported kept by a mount.
    uint32_t holds = 0;            // Held for jobs: kHeld meanwhile.
    bool active = false;           // Active or held.
  };
  // Gives `version` `state` in the store unless it is pinned there.
  void SetStateLocked(uint64_t version, store::VersionState state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `version`'s `last` time is within the last `window`.
  bool Within(uint64_t version, std::chrono::milliseconds window, Clock::time_point Use::*last);
  void DemoteIdle();

  store::ChunkStore* const store_;
  const std::chrono::milliseconds idle_after_;
  Mutex mu_;
  CondVar stop_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Versions touched or kept.
  absl::flat_hash_map<uint64_t, Use> uses_ ABSL_GUARDED_BY(mu_);
  std::thread sweeper_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_CATALOG_VERSION_ACTIVITY_H_
