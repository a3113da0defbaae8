// Parses the XML documents of S3's REST API that granaryd reads: a page of
// ListObjectsV2 and an error reply. Elements are matched by local name, so
// servers that answer in another namespace than AWS's (or none) parse too.
// Parsing is libxml2's, with network access and entity expansion off: a
// listing is input from outside.
//
// Thread-safety: pure functions; safe to call concurrently (libxml2 is
// initialised once, on first use).
#ifndef GRANARY_SOURCE_S3_XML_H_
#define GRANARY_SOURCE_S3_XML_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace granary {

struct S3Object {
  std::string key;  // Decoded when the server encoded keys (encoding-type=url).
  uint64_t size = 0;
  std::string etag;  // As the server quotes it, quotes included.
  int64_t last_modified_ns = 0;
};

struct S3ListPage {
  std::vector<S3Object> objects;
  std::string next_continuation_token;  // Empty on the last page.
};

// INVALID_ARGUMENT naming what is missing or malformed (not XML, no
// ListBucketResult, a Contents without Key or with a bad Size or
// LastModified, a truncated page without a continuation token).
absl::StatusOr<S3ListPage> ParseS3ListPage(std::string_view xml);

// "Code: Message" of an S3 <Error> document, or "" when `xml` is not one.
std::string S3ErrorSummary(std::string_view xml);

}  // namespace granary

#endif  // GRANARY_SOURCE_S3_XML_H_
