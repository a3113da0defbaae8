#include "cli/format.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/size.h"

namespace granary::cli {

std::string FormatPercent(double fraction) {
  // Rounded down, so that nothing short of complete reads "100.0%"; the
  // epsilon absorbs binary error such as 0.425 * 1000 = 424.999...
  return absl::StrFormat("%.1f%%", std::floor(fraction * 1000 + 1e-6) / 10);
}

std::string FormatRate(double bytes_per_second) {
  uint64_t rounded =
      bytes_per_second > 0 ? static_cast<uint64_t>(std::llround(bytes_per_second)) : 0;
  return absl::StrCat(FormatSize(rounded), "/s");
}

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  uint64_t total = static_cast<uint64_t>(std::llround(seconds));
  uint64_t hours = total / 3600;
  uint64_t minutes = total / 60 % 60;
  uint64_t secs = total % 60;
  if (hours > 0) return absl::StrFormat("%d:%02d:%02d", hours, minutes, secs);
  return absl::StrFormat("%d:%02d", minutes, secs);
}

std::optional<double> HitRatio(uint64_t hits, uint64_t misses) {
  if (hits + misses == 0) return std::nullopt;
  return static_cast<double>(hits) / static_cast<double>(hits + misses);
}

double Fraction(uint64_t done, uint64_t total) {
  if (total == 0) return 1.0;
  return static_cast<double>(done) / static_cast<double>(total);
}

std::string FillPolicyName(v1::FillPolicy policy) {
  switch (policy) {
    case v1::FILL_ON_READ:
      return "on-read";
    case v1::FILL_NONE:
      return "none";
    default:
      return "default";
  }
}

std::string FillText(const v1::FillProgress& fill) {
  const v1::PrewarmProgress& progress = fill.progress();
  if (progress.finished()) return "done";
  return absl::StrCat(FormatPercent(Fraction(progress.bytes_done(), progress.bytes_total())),
                      " at ", FormatRate(progress.bytes_per_second()));
}

}  // namespace granary::cli
