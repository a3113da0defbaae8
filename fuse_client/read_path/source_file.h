// SourceFile reads one file of a dataset straight from the dataset's source,
// bypassing granaryd: granary-fuse's fallback when no cache server can serve
// a read. It reads through the Source granaryd reads with
// (source/source.h), one code path for every kind of source: a POSIX file
// is opened beneath the source's root, through no symlink, and held to its
// manifest entry (device, inode, size, mtime, ctime) at every read
// (VerifiedSourceFile); an S3 object is read by a ranged GET held to its
// recorded ETag (If-Match, and the reply's ETag checked). A file changed or
// gone since the manifest fails with FAILED_PRECONDITION (ESTALE to the
// reader), so the bytes of another file or of two versions are never served.
//
// S3 sources, and where granary-fuse's keys may go:
//  - The endpoint and bucket are only those of the dataset's source string,
//    from the catalog record granary-fuse's own granaryd sent it (over its
//    Unix socket, or with the cluster token); granaryd registers S3 sources
//    only from its `s3_endpoints`. granary-fuse takes no endpoint from
//    anywhere else and follows no redirect (libcurl's default, kept), so a
//    request signed here goes to that host only.
//  - The keys are granary-fuse's own, found as granaryd finds them for a
//    dataset that names no profile (FindS3Credentials: the environment, else
//    the dataset's profile, AWS_PROFILE or "default" in the shared files;
//    granaryd's `s3_endpoint_profiles` are not known here). SigV4 sends the
//    access key id and a signature bound to the host, the request and the
//    day, never the secret; a session token travels as a header, as private
//    as the endpoint's scheme makes it. Keys are never logged.
//  - A source that cannot be opened (no keys found, a malformed source
//    string) fails reads with UNAVAILABLE naming the endpoint and why (EIO
//    to the reader), not FAILED_PRECONDITION: the file did not change.
//
// Thread-safety: every method may be called concurrently.
#ifndef GRANARY_FUSE_CLIENT_READ_PATH_SOURCE_FILE_H_
#define GRANARY_FUSE_CLIENT_READ_PATH_SOURCE_FILE_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/dataset/manifest.h"
#include "source/opened_sources.h"

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
  // the manifest's size) through the source `sources` opens. Fails with
  // FAILED_PRECONDITION naming the file if it is redirected, changed, shrank
  // or gone, UNAVAILABLE when the source cannot be opened, else with the
  // source's error naming the file (and, for S3, the endpoint and status).
  absl::Status ReadExactly(OpenedSources& sources, uint64_t offset, std::span<char> out) const;

  // The file's name in its source, for log lines: the path of a POSIX file,
  // s3://BUCKET/KEY of an object.
  std::string Path() const;

 private:
  const std::string_view source_;
  const ManifestEntry& entry_;
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_READ_PATH_SOURCE_FILE_H_
