#include "common/base/size.h"

#include <cctype>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/absl_compat.h"

namespace granary {
namespace {

struct Suffix {
  std::string_view name;
  double multiplier;
};

constexpr Suffix kSuffixes[] = {
    {"", 1},
    {"b", 1},
    {"k", 1e3},
    {"kb", 1e3},
    {"kib", 1024.0},
    {"m", 1e6},
    {"mb", 1e6},
    {"mib", 1024.0 * 1024},
    {"g", 1e9},
    {"gb", 1e9},
    {"gib", 1024.0 * 1024 * 1024},
    {"t", 1e12},
    {"tb", 1e12},
    {"tib", 1024.0 * 1024 * 1024 * 1024},
};

}  // namespace

absl::StatusOr<uint64_t> ParseSize(std::string_view text) {
  std::string_view trimmed = AsStd(absl::StripAsciiWhitespace(AsAbsl(text)));
  size_t number_end = 0;
  while (number_end < trimmed.size() &&
         (std::isdigit(static_cast<unsigned char>(trimmed[number_end])) ||
          trimmed[number_end] == '.')) {
    ++number_end;
  }
  auto invalid = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid size '", AsAbsl(text),
                     "': expected a number with an optional unit (4MiB, 200G, 4096)"));
  };
  if (number_end == 0) return invalid();
  std::string_view digits = trimmed.substr(0, number_end);
  std::string unit =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(AsAbsl(trimmed.substr(number_end))));

  for (const Suffix& suffix : kSuffixes) {
    if (unit != suffix.name) continue;
    uint64_t whole = 0;
    if (absl::SimpleAtoi(AsAbsl(digits), &whole) && suffix.multiplier == 1) return whole;
    double value = 0;
    if (!absl::SimpleAtod(AsAbsl(digits), &value)) return invalid();
    double bytes = std::round(value * suffix.multiplier);
    if (bytes >= static_cast<double>(std::numeric_limits<uint64_t>::max())) {
      return absl::OutOfRangeError(absl::StrCat("size '", AsAbsl(text), "' is too large"));
    }
    return static_cast<uint64_t>(bytes);
  }
  return invalid();
}

std::string FormatSize(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

}  // namespace granary
