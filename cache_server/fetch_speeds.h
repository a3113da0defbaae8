// FetchSpeeds remembers how fast this node has lately filled misses from its
// peers' caches and from the sources, so that a miss is copied from a peer
// only while that is the faster way. Copying from another group spares the
// shared storage a second read, which is worth it where the network between
// groups outruns the storage (the usual case); where it does not (a slow link,
// a busy peer), reading the source is faster and the job should not wait.
//
// Each path keeps an exponentially weighted mean of seconds per byte over its
// recent fetches. Peers are preferred until they have been measured, and
// while their mean is within kPeerSlack of the source's. One miss in
// kProbeInterval takes the other path, so that each path's mean stays current
// and a recovered link wins its traffic back; with peers preferred, that costs
// the shared storage one extra read in kProbeInterval misses.
//
// Thread-safety: all methods may be called concurrently.
#ifndef GRANARY_CACHE_SERVER_FETCH_SPEEDS_H_
#define GRANARY_CACHE_SERVER_FETCH_SPEEDS_H_

#include <chrono>
#include <cstdint>
#include <mutex>

namespace granary {

class FetchSpeeds {
 public:
  enum class Path { kPeer, kSource };

  // A peer copy may take this many times as long per byte as a source read
  // and still be preferred: it spares the shared storage.
  static constexpr double kPeerSlack = 1.25;
  static constexpr uint64_t kProbeInterval = 32;

  void Record(Path path, uint64_t bytes, std::chrono::steady_clock::duration elapsed);

  // Whether the next miss should try peers before the source.
  bool PreferPeers();

 private:
  // Weight of the newest fetch in a path's mean.
  static constexpr double kWeight = 0.1;

  struct Mean {
    double seconds_per_byte = 0;
    bool measured = false;
  };

  std::mutex mutex_;
  Mean peer_;            // Guarded by mutex_.
  Mean source_;          // Guarded by mutex_.
  uint64_t misses_ = 0;  // Guarded by mutex_.
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_FETCH_SPEEDS_H_
