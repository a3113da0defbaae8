#include "csi/mount_table.h"

#include <cerrno>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/absl_compat.h"
#include "common/base/printable.h"
#include "common/base/status.h"

namespace granary::csi_driver {
namespace {

constexpr char kMountInfoPath[] = "/proc/self/mountinfo";

// The kernel writes space, tab, newline and backslash in paths as \ooo.
std::string Unescape(std::string_view field) {
  std::string out;
  out.reserve(field.size());
  for (size_t i = 0; i < field.size(); ++i) {
    bool octal = field[i] == '\\' && i + 3 < field.size();
    if (octal) {
      for (size_t j = 1; j <= 3 && octal; ++j) octal = field[i + j] >= '0' && field[i + j] <= '7';
    }
    if (!octal) {
      out.push_back(field[i]);
      continue;
    }
    out.push_back(static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                                    (field[i + 3] - '0')));
    i += 3;
  }
  return out;
}

bool HasOption(std::string_view options, std::string_view option) {
  for (absl::string_view each : absl::StrSplit(AsAbsl(options), ',')) {
    if (AsStd(each) == option) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::vector<MountEntry>> ParseMountInfo(std::string_view text) {
  std::vector<MountEntry> table;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(AsAbsl(text), '\n', absl::SkipEmpty())) {
    ++line_number;
    // id parent major:minor root mount-point options [optional...] - type source super-options
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    size_t separator = 6;
    while (separator < fields.size() && fields[separator] != "-") ++separator;
    if (fields.size() < 6 || separator + 1 >= fields.size()) {
      return absl::InvalidArgumentError(absl::StrCat("mountinfo line ", line_number, " '",
                                                     Printable(AsStd(line)), "' is malformed"));
    }
    table.push_back({.device = std::string(fields[2]),
                     .root = Unescape(AsStd(fields[3])),
                     .mount_point = Unescape(AsStd(fields[4])),
                     .read_only = HasOption(AsStd(fields[5]), "ro"),
                     .fs_type = Unescape(AsStd(fields[separator + 1]))});
  }
  return table;
}

absl::StatusOr<std::vector<MountEntry>> ReadMountTable() {
  std::ifstream in(kMountInfoPath);
  if (!in) return ErrnoStatus(errno, kMountInfoPath);
  std::ostringstream text;
  text << in.rdbuf();
  return ParseMountInfo(text.str());
}

const MountEntry* TopmostMountAt(const std::vector<MountEntry>& table,
                                 std::string_view mount_point) {
  const MountEntry* found = nullptr;
  for (const MountEntry& entry : table) {
    if (entry.mount_point == mount_point) found = &entry;
  }
  return found;
}

}  // namespace granary::csi_driver
