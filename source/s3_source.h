// The S3 source: a dataset that lives under a prefix of a bucket of an
// S3-compatible object store (AWS S3, Ceph RGW, MinIO, GCS's S3 API, ...),
// named by an s3:// source string (common/source_access/s3_location.h).
//
// A scan lists the prefix with ListObjectsV2, page after page, and maps the
// keys to a tree (s3_tree.h). A read is one ranged GET of exactly the bytes
// asked for, with If-Match on the ETag the scan recorded: an object
// overwritten or deleted since fails with FAILED_PRECONDITION naming it.
//
// Thread-safety: safe to call concurrently.
#ifndef GRANARY_SOURCE_S3_SOURCE_H_
#define GRANARY_SOURCE_S3_SOURCE_H_

#include <memory>

#include "source/s3_client.h"
#include "source/source.h"

namespace granary {

class S3Source : public Source {
 public:
  explicit S3Source(std::unique_ptr<S3Client> client) : client_(std::move(client)) {}

  absl::StatusOr<ScannedTree> Scan(size_t max_entries) const override;
  absl::StatusOr<std::string> ReadRange(const ManifestEntry& entry, uint64_t offset,
                                        uint32_t length) const override;

 private:
  const std::unique_ptr<S3Client> client_;
};

}  // namespace granary

#endif  // GRANARY_SOURCE_S3_SOURCE_H_
