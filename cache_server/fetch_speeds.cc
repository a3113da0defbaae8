#include "cache_server/fetch_speeds.h"

namespace granary {

void FetchSpeeds::Record(Path path, uint64_t bytes, std::chrono::steady_clock::duration elapsed) {
  if (bytes == 0) return;
  double sample = std::chrono::duration<double>(elapsed).count() / static_cast<double>(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  Mean& mean = path == Path::kPeer ? peer_ : source_;
  mean.seconds_per_byte =
      mean.measured ? mean.seconds_per_byte + kWeight * (sample - mean.seconds_per_byte) : sample;
  mean.measured = true;
}

bool FetchSpeeds::PreferPeers() {
  std::lock_guard<std::mutex> lock(mutex_);
  bool peers_faster = !peer_.measured || !source_.measured ||
                      peer_.seconds_per_byte <= kPeerSlack * source_.seconds_per_byte;
  if (++misses_ % kProbeInterval == 0) return !peers_faster;
  return peers_faster;
}

}  // namespace granary
