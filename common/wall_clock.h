// The wall clock as Granary records it: milliseconds since 1970, the unit of
// catalog dates, retirement stamps and chunk-store access times.
//
// Thread-safety: a pure function of the system clock.
#ifndef GRANARY_COMMON_WALL_CLOCK_H_
#define GRANARY_COMMON_WALL_CLOCK_H_

#include <chrono>
#include <cstdint>

namespace granary {

inline int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace granary

#endif  // GRANARY_COMMON_WALL_CLOCK_H_
