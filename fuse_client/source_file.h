// SourceFile reads one file of a dataset straight from the dataset's source,
// bypassing granaryd: granary-fuse's fallback when the server cannot serve a
// read. Only POSIX sources ("posix:///path" or a bare path) are readable this
// way. The file is opened on first use as a VerifiedSourceFile
// (common/verified_source_file.h), the same code granaryd reads sources with:
// beneath the source's root, through no symlink, and held to its manifest
// entry (device, inode, size, mtime, ctime) at the open and after every read.
// Once the file is found redirected or changed, every read fails with
// FAILED_PRECONDITION (ESTALE to the reader), so the bytes of another file or
// of two versions are never served.
//
// Thread-safety: every method may be called concurrently.
#ifndef GRANARY_FUSE_CLIENT_SOURCE_FILE_H_
#define GRANARY_FUSE_CLIENT_SOURCE_FILE_H_

#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/manifest.h"
#include "common/verified_source_file.h"

namespace granary::fuse {

class SourceFile {
 public:
  // `source` is the dataset's source as registered; `entry` the file's
  // manifest entry (both must outlive this object).
  SourceFile(std::string_view source, const ManifestEntry& entry)
      : source_(source), entry_(entry) {}
  SourceFile(const SourceFile&) = delete;
  SourceFile& operator=(const SourceFile&) = delete;

  // Reads exactly `out.size()` bytes at `offset` (the range must lie inside
  // the manifest's size). Fails with FAILED_PRECONDITION naming the file if
  // it is redirected, changed or shrank, INVALID_ARGUMENT for a non-POSIX
  // source, else with the errno of the failed call, naming the file.
  absl::Status ReadExactly(uint64_t offset, std::span<char> out);

  // The source path of the file (for log lines), or the source if not POSIX.
  std::string Path() const;

 private:
  absl::StatusOr<const VerifiedSourceFile*> Open();

  const std::string_view source_;
  const ManifestEntry& entry_;
  std::mutex mutex_;
  std::optional<VerifiedSourceFile> file_;
  absl::Status open_status_;  // Sticky once the file was found redirected or changed.
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_SOURCE_FILE_H_
