#include "cli/format.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/base/size.h"

namespace granary::cli {

std::string FormatUnixMs(int64_t unix_ms) {
  std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S UTC", &utc);
  return text;
}

std::string DisplayName(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    const size_t length = Utf8CharacterLength(bytes.substr(i));
    // C1 controls (U+0080-U+009F) are as unsafe on a terminal as C0 ones.
    const bool control =
        c < 0x20 || c == 0x7f ||
        (c == 0xc2 && length == 2 && static_cast<unsigned char>(bytes[i + 1]) < 0xa0);
    if (c == '\\') {
      out.append("\\\\");
      ++i;
    } else if (length == 0 || control) {
      for (size_t end = i + std::max<size_t>(length, 1); i < end; ++i) {
        absl::StrAppendFormat(&out, "\\x%02x", static_cast<unsigned char>(bytes[i]));
      }
    } else {
      out.append(bytes.substr(i, length));
      i += length;
    }
  }
  return out;
}

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

std::string PrewarmFailureCount(const v1::PrewarmProgress& progress) {
  int files = 0, shares = 0;
  for (const v1::FileFailure& failure : progress.failures()) {
    ++(failure.path().empty() ? shares : files);
  }
  std::vector<std::string> parts;
  if (files > 0) parts.push_back(absl::StrCat(files, files == 1 ? " file" : " files"));
  if (shares > 0) {
    parts.push_back(absl::StrCat(shares, shares == 1 ? " node's share" : " nodes' shares"));
  }
  return absl::StrJoin(parts, " and ");
}

std::string PrewarmFailuresText(std::string_view dataset, const v1::PrewarmProgress& progress) {
  if (progress.failures().empty()) return "";
  const v1::FileFailure& first = progress.failures(0);
  return absl::StrCat(PrewarmFailureCount(progress), " of '", DisplayName(dataset),
                      "' failed to prewarm; the first: ",
                      first.path().empty() ? "" : absl::StrCat(DisplayName(first.path()), ": "),
                      first.error());
}

}  // namespace granary::cli
