// FetchSpeeds remembers how fast this node has lately filled misses from its
// peers' caches and from the sources, so that a miss is copied from a peer
// only while that is the faster way. Copying from another group spares the
// shared storage a second read, which is worth it where the network between
// groups outruns the storage (the usual case); where it does not (a slow link,
// a busy peer), reading the source is faster and the job should not wait.
//
// Each path keeps an exponentially weighted mean of its cost per byte over
// its recent fetches: a fetch's time divided by its bytes and by the fetches
// in flight on the path when it began. A path whose bandwidth is the limit
// takes longer per fetch the more run at once, so dividing by them compares
// the paths' bandwidths, not how busy each happened to be (a path used only
// by probes would otherwise look faster than it is). Peers are preferred
// until they have been measured, and while their mean is within kPeerSlack of
// the source's. One miss in kProbeInterval takes the other path, so that each
// path's mean stays current and a recovered link wins its traffic back; with
// peers preferred, that costs the shared storage one extra read in
// kProbeInterval misses.
//
// Thread-safety: all methods may be called concurrently.
#ifndef GRANARY_CACHE_SERVER_READ_PATH_FETCH_SPEEDS_H_
#define GRANARY_CACHE_SERVER_READ_PATH_FETCH_SPEEDS_H_

#include <chrono>
#include <cstdint>

#include "common/base/mutex.h"

namespace granary {

class FetchSpeeds {
 public:
  enum class Path { kPeer, kSource };

  // A fetch in flight, from Begin() to End().
  struct Fetch {
    Path path;
    std::chrono::steady_clock::time_point started;
    uint32_t concurrent;  // Fetches in flight on the path when it began, itself included.
  };

  // A peer copy may cost this many times as much per byte as a source read
  // and still be preferred: it spares the shared storage.
  static constexpr double kPeerSlack = 1.25;
  static constexpr uint64_t kProbeInterval = 32;

  Fetch Begin(Path path);
  // Ends `fetch`; `bytes` 0 (a failed fetch) is not measured.
  void End(const Fetch& fetch, uint64_t bytes);

  // Adds one measured fetch to `path`'s mean.
  void Record(Path path, uint64_t bytes, std::chrono::steady_clock::duration elapsed,
              uint32_t concurrent);

  // Whether the next miss should try peers before the source.
  bool PreferPeers();

 private:
  // Weight of the newest fetch in a path's mean.
  static constexpr double kWeight = 0.1;

  struct Mean {
    double seconds_per_byte = 0;
    bool measured = false;
    uint32_t in_flight = 0;
  };

  Mean& MeanOf(Path path) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    return path == Path::kPeer ? peer_ : source_;
  }

  Mutex mutex_;
  Mean peer_ ABSL_GUARDED_BY(mutex_);
  Mean source_ ABSL_GUARDED_BY(mutex_);
  uint64_t misses_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_READ_PATH_FETCH_SPEEDS_H_
