// Fraction and HitRatio: the two ratios every view of the cache shows (the
// CLI's tables and documents, granaryd's status page), defined once so that
// they agree on the empty cases.
//
// Thread-safety: pure functions.
#ifndef GRANARY_COMMON_REPORTS_FRACTION_H_
#define GRANARY_COMMON_REPORTS_FRACTION_H_

#include <cstdint>
#include <optional>

namespace granary {

// hits / (hits + misses), or nothing before the first read.
std::optional<double> HitRatio(uint64_t hits, uint64_t misses);

// `done` / `total` as a fraction; an empty total is complete.
double Fraction(uint64_t done, uint64_t total);

}  // namespace granary

#endif  // GRANARY_COMMON_REPORTS_FRACTION_H_
