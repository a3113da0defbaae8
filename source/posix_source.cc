#include "source/posix_source.h"

#include "common/base/filled_string.h"
#include "common/base/status.h"
#include "common/source_access/verified_source_file.h"
#include "source/posix_scanner.h"

namespace granary {

absl::StatusOr<ScannedTree> PosixSource::Scan(size_t max_entries) const {
  return ScanPosixTree(root_, scan_threads_, max_entries);
}

absl::StatusOr<std::string> PosixSource::ReadRange(const ManifestEntry& entry, uint64_t offset,
                                                   uint32_t length) const {
  GRANARY_ASSIGN_OR_RETURN(Range range, ReadRangeNoticingChanges(entry, offset, length));
  return std::move(range.bytes);
}

absl::StatusOr<Source::Range> PosixSource::ReadRangeNoticingChanges(const ManifestEntry& entry,
                                                                    uint64_t offset,
                                                                    uint32_t length) const {
  GRANARY_ASSIGN_OR_RETURN(VerifiedSourceFile file, VerifiedSourceFile::Open(root_, entry));
  GRANARY_ASSIGN_OR_RETURN(std::string bytes, FilledString(length, [&](std::span<char> out) {
                             return file.ReadExactly(offset, out);
                           }));
  return Range{std::move(bytes), file.metadata_changed()};
}

}  // namespace granary
