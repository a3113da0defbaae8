// The posix source: a dataset that lives in a directory of any POSIX
// filesystem (local disk, NFS, Lustre, ...), named "posix:///abs/path" or by a
// bare absolute path (PosixRootOf, common/source_access/source_path.h). Granary only ever
// reads it.
//
// Reads go through VerifiedSourceFile (common/source_access/verified_source_file.h), which
// opens the file beneath the source's root without following any symlink and
// guarantees the bytes belong to the very file the manifest recorded, so that
// a file replaced, redirected, truncated or rewritten since registration
// fails with FAILED_PRECONDITION naming it instead of yielding bytes of
// another file or another version; a file whose metadata alone changed (a
// chmod, a chown, an attribute, a hard link) still reads, and
// ReadRangeNoticingChanges() reports it. Scans are ScanPosixTree's
// (posix_scanner.h).
//
// Thread-safety: immutable; safe to call concurrently.
#ifndef GRANARY_SOURCE_POSIX_SOURCE_H_
#define GRANARY_SOURCE_POSIX_SOURCE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/dataset/manifest.h"
#include "source/source.h"

namespace granary {

class PosixSource : public Source {
 public:
  // `root` is the canonical directory; scans list it with `scan_threads`.
  PosixSource(std::string root, int scan_threads)
      : root_(std::move(root)), scan_threads_(scan_threads) {}

  absl::StatusOr<ScannedTree> Scan(size_t max_entries) const override;
  // FAILED_PRECONDITION naming the file when it is gone, reached through a
  // symlink or no longer the file the entry recorded; PERMISSION_DENIED or
  // another errno-derived code naming it when it cannot be read.
  absl::StatusOr<std::string> ReadRange(const ManifestEntry& entry, uint64_t offset,
                                        uint32_t length) const override;
  absl::StatusOr<Range> ReadRangeNoticingChanges(const ManifestEntry& entry, uint64_t offset,
                                                 uint32_t length) const override;

 private:
  const std::string root_;
  const int scan_threads_;
};

}  // namespace granary

#endif  // GRANARY_SOURCE_POSIX_SOURCE_H_
