#include "common/reports/fraction.h"

namespace granary {

std::optional<double> HitRatio(uint64_t hits, uint64_t misses) {
  if (hits + misses == 0) return std::nullopt;
  return static_cast<double>(hits) / static_cast<double>(hits + misses);
}

double Fraction(uint64_t done, uint64_t total) {
  if (total == 0) return 1.0;
  return static_cast<double>(done) / static_cast<double>(total);
}

}  // namespace granary
