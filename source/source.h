// Source is what granaryd needs of the place a dataset lives: a scan of its
// tree into manifest entries (registration and refresh) and reads of byte
// ranges of the files that scan recorded (misses, prewarm, fills). Each kind
// of source implements it: a POSIX directory (posix_source.h) and an
// S3-compatible bucket (s3_source.h). Sources (cache_server/access/sources.h) picks the one a
// dataset's source string names.
//
// Every implementation holds reads to the entry the scan recorded: a file
// or object changed since fails with FAILED_PRECONDITION naming it (ESTALE
// through a mount), never with bytes of another version.
//
// Thread-safety: implementations are safe to call concurrently.
#ifndef GRANARY_SOURCE_SOURCE_H_
#define GRANARY_SOURCE_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "common/dataset/manifest.h"

namespace granary {

struct ScannedTree {
  ManifestEntries entries;  // Unsorted.
  SkippedEntries skipped;
};

class Source {
 public:
  virtual ~Source() = default;

  // The tree as it is now; RESOURCE_EXHAUSTED when it has more than
  // `max_entries` entries, root included.
  virtual absl::StatusOr<ScannedTree> Scan(size_t max_entries) const = 0;

  // Exactly `length` bytes at `offset` of file `entry` (the range lies
  // inside its size).
  virtual absl::StatusOr<std::string> ReadRange(const ManifestEntry& entry, uint64_t offset,
                                                uint32_t length) const = 0;

  // ReadRange(), telling also whether the file's metadata (owner, mode,
  // links, attributes) changed since the scan while its bytes did not: such
  // a read is served, and its dataset should be refreshed to record the
  // change. Sources whose entries record no such metadata never report one.
  struct Range {
    std::string bytes;
    bool metadata_changed = false;
  };
  virtual absl::StatusOr<Range> ReadRangeNoticingChanges(const ManifestEntry& entry,
                                                         uint64_t offset, uint32_t length) const;
};

inline absl::StatusOr<Source::Range> Source::ReadRangeNoticingChanges(const ManifestEntry& entry,
                                                                      uint64_t offset,
                                                                      uint32_t length) const {
  absl::StatusOr<std::string> bytes = ReadRange(entry, offset, length);
  if (!bytes.ok()) return bytes.status();
  return Range{*std::move(bytes), false};
}

}  // namespace granary

#endif  // GRANARY_SOURCE_SOURCE_H_
