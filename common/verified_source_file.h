// VerifiedSourceFile is one regular file of a POSIX source, opened beneath
// the source's root (common/source_path.h: no symlink, no "..") and held to
// its manifest entry: the file opened must be the very file the manifest
// recorded (a regular file with the same device, inode, size, mtime and
// ctime) when it is opened, and still be after every read. Anything else --
// a path redirected through a symlink, a directory renamed over another, a
// file replaced, rewritten, truncated, chmod'ed or touched -- fails with
// FAILED_PRECONDITION naming the file and what changed (ESTALE through a
// mount), so a read never yields bytes of another file or of two versions.
// ctime matters: truncate and touch can forge a size and an mtime, but every
// such change sets the ctime to the present.
//
// granaryd's source reads (source/posix_source.h) and
// granary-fuse's direct reads (fuse_client/source_file.h) both read through
// this class.
//
// Thread-safety: ReadExactly may be called concurrently; moving is not.
#ifndef GRANARY_COMMON_VERIFIED_SOURCE_FILE_H_
#define GRANARY_COMMON_VERIFIED_SOURCE_FILE_H_

#include <sys/stat.h>

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "common/manifest.h"
#include "common/unique_fd.h"

namespace granary {

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

 private:
  VerifiedSourceFile(UniqueFd fd, const ManifestEntry& entry)
      : fd_(std::move(fd)), entry_(&entry) {}
  absl::Status CheckStillSame() const;

  UniqueFd fd_;
  const ManifestEntry* entry_;
};

// OK when `st` (an fstat of an opened source file) is the file `entry`
// recorded; else FAILED_PRECONDITION naming the file and each field that
// differs.
absl::Status CheckSameFile(const struct stat& st, const ManifestEntry& entry);

}  // namespace granary

#endif  // GRANARY_COMMON_VERIFIED_SOURCE_FILE_H_
