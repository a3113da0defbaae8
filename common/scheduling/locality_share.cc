#include "common/scheduling/locality_share.h"

#include <algorithm>

namespace granary {

double LocalityShare(uint64_t held_bytes, uint64_t dataset_bytes, uint32_t copies) {
  if (dataset_bytes == 0) return 1.0;
  const double whole = static_cast<double>(dataset_bytes) * std::max<uint32_t>(1, copies);
  return std::min(1.0, static_cast<double>(held_bytes) / whole);
}

}  // namespace granary
