// VersionActivity tells the chunk store which dataset versions running jobs
// use, so that its eviction drops unused datasets first. A version becomes
// active when it is read or prewarmed and returns to inactive once nothing has
// touched it for `idle_after`.
//
// Thread-safety: all methods are safe to call concurrently; a background
// thread, stopped by the destructor, does the demotions.
#ifndef GRANARY_CACHE_SERVER_VERSION_ACTIVITY_H_
#define GRANARY_CACHE_SERVER_VERSION_ACTIVITY_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "cache_server/store/chunk_store.h"

namespace granary {

class VersionActivity {
 public:
  VersionActivity(store::ChunkStore* store, std::chrono::milliseconds idle_after);
  ~VersionActivity();
  VersionActivity(const VersionActivity&) = delete;
  VersionActivity& operator=(const VersionActivity&) = delete;

  // Marks `version` used now; it becomes active if it was not.
  void Touch(uint64_t version);
  // Stops tracking a removed version.
  void Forget(uint64_t version);

 private:
  using Clock = std::chrono::steady_clock;
  void DemoteIdle();

  store::ChunkStore* const store_;
  const std::chrono::milliseconds idle_after_;
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  absl::flat_hash_map<uint64_t, Clock::time_point> last_use_;  // Active versions.
  std::thread sweeper_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_VERSION_ACTIVITY_H_
