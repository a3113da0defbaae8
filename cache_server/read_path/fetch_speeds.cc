#include "cache_server/read_path/fetch_speeds.h"

namespace granary {

FetchSpeeds::Fetch FetchSpeeds::Begin(Path path) {
  MutexLock lock(&mutex_);
  return {path, std::chrono::steady_clock::now(), ++MeanOf(path).in_flight};
}

void FetchSpeeds::End(const Fetch& fetch, uint64_t bytes) {
  {
    MutexLock lock(&mutex_);
    --MeanOf(fetch.path).in_flight;
  }
  Record(fetch.path, bytes, std::chrono::steady_clock::now() - fetch.started, fetch.concurrent);
}

void FetchSpeeds::Record(Path path, uint64_t bytes, std::chrono::steady_clock::duration elapsed,
                         uint32_t concurrent) {
  if (bytes == 0 || concurrent == 0) return;
  double sample = std::chrono::duration<double>(elapsed).count() /
                  (static_cast<double>(bytes) * static_cast<double>(concurrent));
  MutexLock lock(&mutex_);
  Mean& mean = MeanOf(path);
  mean.seconds_per_byte =
      mean.measured ? mean.seconds_per_byte + kWeight * (sample - mean.seconds_per_byte) : sample;
  mean.measured = true;
}

bool FetchSpeeds::PreferPeers() {
  MutexLock lock(&mutex_);
  bool peers_faster = !peer_.measured || !source_.measured ||
                      peer_.seconds_per_byte <= kPeerSlack * source_.seconds_per_byte;
  if (++misses_ % kProbeInterval == 0) return !peers_faster;
  return peers_faster;
}

}  // namespace granary
