// SourceFile reads one file of a dataset straight from the dataset's source,
// bypassing granaryd: granary-fuse's fallback when the server cannot serve a
// read. Only POSIX sources ("posix:///path" or a bare path) are readable this
// way. The file is opened on first use and checked against its manifest entry:
// a size or mtime that differs means the source changed since the snapshot,
// and every read fails with FAILED_PRECONDITION (ESTALE to the reader), so the
// bytes of two versions are never mixed.
//
// Thread-safety: every method may be called concurrently.
#ifndef GRANARY_FUSE_CLIENT_SOURCE_FILE_H_
#define GRANARY_FUSE_CLIENT_SOURCE_FILE_H_

#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/manifest.h"

namespace granary::fuse {

class SourceFile {
 public:
  // `source` is the dataset's source as registered; `entry` the file's
  // manifest entry (both must outlive this object).
  SourceFile(std::string_view source, const ManifestEntry& entry)
      : source_(source), entry_(entry) {}
  ~SourceFile();
  SourceFile(const SourceFile&) = delete;
  SourceFile& operator=(const SourceFile&) = delete;

  // Reads exactly `out.size()` bytes at `offset` (the range must lie inside
  // the manifest's size). Fails with FAILED_PRECONDITION if the source file
  // changed or shrank, UNIMPLEMENTED for a non-POSIX source, else with the
  // errno of the failed call, naming the path.
  absl::Status ReadExactly(uint64_t offset, std::span<char> out);

  // The source path of the file (for log lines), or the source if not POSIX.
  std::string Path() const;

 private:
  absl::StatusOr<int> Open();

  const std::string_view source_;
  const ManifestEntry& entry_;
  std::mutex mutex_;
  int fd_ = -1;
  absl::Status open_status_;  // Sticky once the file was found changed.
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_SOURCE_FILE_H_
