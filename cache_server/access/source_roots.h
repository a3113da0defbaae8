// SourceRoots confines dataset registration to the directories an
// administrator configured (`source_roots` in granaryd's config, or
// --source-root): a source must be one of them or lie beneath one, judged on
// canonical paths, so neither "..", a symlink, nor a NUL byte in a source
// string can name a directory outside them. With no roots configured, no
// source is accepted: what the administrator did not open stays closed.
//
// Registration (DatasetRegistry::Add and Refresh) and records taken from
// peers (DatasetRegistry::Adopt) are both checked against this node's roots.
//
// Thread-safety: immutable after Resolve(); Confine() may be called
// concurrently.
#ifndef GRANARY_CACHE_SERVER_ACCESS_SOURCE_ROOTS_H_
#define GRANARY_CACHE_SERVER_ACCESS_SOURCE_ROOTS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace granary {

class SourceRoots {
 public:
  // Canonicalises each configured root. INVALID_ARGUMENT naming a root that
  // is not an absolute path to an existing directory.
  static absl::StatusOr<SourceRoots> Resolve(const std::vector<std::string>& roots);

  // The canonical path of `source` (posix:///path or /path) when it is one of
  // the roots or beneath one. PERMISSION_DENIED naming the source and the
  // roots when it is outside them (or no root is configured); NOT_FOUND when
  // it does not exist; INVALID_ARGUMENT when it is not a path.
  absl::StatusOr<std::string> Confine(std::string_view source) const;

  const std::vector<std::string>& roots() const { return roots_; }

 private:
  explicit SourceRoots(std::vector<std::string> roots) : roots_(std::move(roots)) {}

  std::vector<std::string> roots_;  // Canonical.
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_ACCESS_SOURCE_ROOTS_H_
