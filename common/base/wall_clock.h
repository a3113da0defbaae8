// The wall clock as Granary records it: milliseconds since 1970, the unit of
// catalog dates, retirement stamps and chunk-store access times.
//
// Thread-safety: a pure function of the system clock.
#ifndef GRANARY_COMMON_BASE_WALL_CLOCK_H_
#define GRANARY_COMMON_BASE_WALL_CLOCK_H_

#include <chrono>
#include <cstdint>

namespace granary {

// How far ahead of this node's clock a peer's date may be: clocks of a
// cluster's nodes differ by seconds, and a date far ahead would outrank every
// later change until the clocks caught up.
inline constexpr std::chrono::minutes kMaxPeerClockAhead{5};

inline int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace granary

#endif  // GRANARY_COMMON_BASE_WALL_CLOCK_H_
