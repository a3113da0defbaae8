// Which kind of place a dataset's source string names, decided here for every
// part of Granary (granaryd, granary-fuse, the CLI):
//   s3://BUCKET[/PREFIX][?PARAMETERS]   an S3-compatible bucket
//   (common/source_access/s3_location.h) posix:///ABS/PATH or /ABS/PATH       a POSIX directory
//   (common/source_access/source_path.h)
// A new kind (HDFS, GCS) is a new SourceKind with its branch in the
// functions below and its Source beside posix_source.h and s3_source.h; the
// compiler then names every switch over SourceKind that must learn it (each
// is exhaustive, with no default).
//
// Thread-safety: pure functions.
#ifndef GRANARY_SOURCE_SOURCE_KIND_H_
#define GRANARY_SOURCE_SOURCE_KIND_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace granary {

enum class SourceKind { kPosix, kS3 };

// The kind `source` names by its form alone; whether it is a valid source of
// that kind is for the kind's parser to say.
SourceKind KindOf(std::string_view source);

// `source` as datasets record and compare it: a POSIX source as given, an S3
// source with its parameters in canonical form. INVALID_ARGUMENT naming what
// is wrong with an S3 source.
absl::StatusOr<std::string> CanonicalSource(std::string_view source);

// Where the dataset path `path` ("" for the root) lives in `source`, as
// people name it in logs and errors: a file path or an s3:// URL. `source`
// itself when it cannot be parsed.
std::string SourcePathOf(std::string_view source, std::string_view path);

}  // namespace granary

#endif  // GRANARY_SOURCE_SOURCE_KIND_H_
