// VerifiedSourceFile is one regular file of a POSIX source, opened beneath
// the source's root (common/source_access/source_path.h: no symlink, no "..") and held to
// its manifest entry: the file opened must be the very file the manifest
// recorded (a regular file with the same device, inode, size and mtime)
// when it is opened, and still be after every read. Anything else -- a path
// redirected through a symlink, a directory renamed over another, a file
// replaced, rewritten, truncated or touched -- fails with FAILED_PRECONDITION
// naming the file and what changed (ESTALE through a mount), so a read never
// yields bytes of another file.
//
// A ctime that alone moved is a change of metadata: a chmod, a chown, an
// extended attribute or a new hard link. The bytes are those recorded and
// still read, and the file says so (metadata_changed()), so that the reader
// has the dataset refreshed to learn the new owner and mode
// (cache_server/catalog/source_change_refresher.h). A rewrite that keeps the
// size and forges the mtime back looks alike; only a writer of the source
// can make one, and the refresh it causes records the file as it is.
//
// granaryd's source reads (source/posix_source.h) and
// granary-fuse's direct reads (fuse_client/read_path/source_file.h) both read through
// this class.
//
// Thread-safety: ReadExactly may be called concurrently; moving is not.
#ifndef GRANARY_COMMON_SOURCE_ACCESS_VERIFIED_SOURCE_FILE_H_
#define GRANARY_COMMON_SOURCE_ACCESS_VERIFIED_SOURCE_FILE_H_

#include <sys/stat.h>

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "common/base/unique_fd.h"
#include "common/dataset/manifest.h"

namespace granary {

// How an opened source file compares with the manifest entry of the file it
// is.
enum class SourceFileMatch {
  kAsRecorded,
  // Same device, inode, size and mtime; only the ctime moved.
  kMetadataChanged,
};

class VerifiedSourceFile {
 public:
  // Opens file `entry` (which must outlive the object) of the source whose
  // root directory is `root`. FAILED_PRECONDITION naming the file when the
  // root or the file is gone, the path is redirected, or the file opened is
  // not the one `entry` recorded; else the errno of the failed call
  // (PERMISSION_DENIED, ...), naming the file.
  static absl::StatusOr<VerifiedSourceFile> Open(std::string_view root, const ManifestEntry& entry);

  // Reads exactly `out.size()` bytes at `offset` (the range must lie inside
  // the entry's size), then checks the file again. FAILED_PRECONDITION naming
  // the file when it shrank or changed.
  absl::Status ReadExactly(uint64_t offset, std::span<char> out) const;

  // Whether only the file's metadata had changed since the scan when it was
  // opened (SourceFileMatch::kMetadataChanged).
  bool metadata_changed() const { return metadata_changed_; }

 private:
  VerifiedSourceFile(UniqueFd fd, const ManifestEntry& entry)
      : fd_(std::move(fd)), entry_(&entry) {}
  absl::StatusOr<SourceFileMatch> CheckStillSame() const;

  UniqueFd fd_;
  const ManifestEntry* entry_;
  bool metadata_changed_ = false;
};

// How `st` (an fstat of an opened source file) matches the file `entry`
// recorded; FAILED_PRECONDITION naming the file and each field that differs
// when it is another file or its bytes changed.
absl::StatusOr<SourceFileMatch> CheckSameFile(const struct stat& st, const ManifestEntry& entry);

}  // namespace granary

#endif  // GRANARY_COMMON_SOURCE_ACCESS_VERIFIED_SOURCE_FILE_H_
