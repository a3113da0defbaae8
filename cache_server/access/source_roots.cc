#include "cache_server/access/source_roots.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/absl_compat.h"
#include "common/base/status.h"
#include "common/source_access/source_path.h"

namespace granary {
namespace {

// The canonical form of an existing absolute path: no symlink, "." or "..".
absl::StatusOr<std::string> Canonical(const std::string& path, std::string_view what) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) {
    return ErrnoStatus(errno, absl::StrCat(AsAbsl(what), " ", path));
  }
  return std::string(resolved);
}

bool IsBeneath(std::string_view path, std::string_view root) {
  if (root == "/") return true;
  return path == root || (absl::StartsWith(AsAbsl(path), AsAbsl(root)) &&
                          path.size() > root.size() && path[root.size()] == '/');
}

}  // namespace

absl::StatusOr<SourceRoots> SourceRoots::Resolve(const std::vector<std::string>& roots) {
  std::vector<std::string> canonical;
  for (const std::string& root : roots) {
    if (root.empty() || root.front() != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat("source root '", root, "' is not an absolute path"));
    }
    absl::StatusOr<std::string> resolved = Canonical(root, "source root");
    if (!resolved.ok()) return absl::InvalidArgumentError(resolved.status().message());
    struct stat st;
    if (::stat(resolved->c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat("source root ", root, " is not a directory"));
    }
    canonical.push_back(*std::move(resolved));
  }
  return SourceRoots(std::move(canonical));
}

absl::StatusOr<std::string> SourceRoots::Confine(std::string_view source) const {
  if (source.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError("source path contains a NUL byte");
  }
  GRANARY_ASSIGN_OR_RETURN(std::string path, PosixRootOf(source));
  if (roots_.empty()) {
    return absl::PermissionDeniedError(
        "this granaryd has no source roots configured, so no dataset can be registered; an "
        "administrator lists the directories datasets may come from in granaryd's config "
        "(source_roots) or with --source-root");
  }
  absl::StatusOr<std::string> canonical = Canonical(path, "source");
  if (!canonical.ok()) {
    if (absl::IsNotFound(canonical.status())) {
      return absl::NotFoundError(absl::StrCat("source directory ", path, " does not exist"));
    }
    return canonical.status();
  }
  for (const std::string& root : roots_) {
    if (IsBeneath(*canonical, root)) return canonical;
  }
  return absl::PermissionDeniedError(
      absl::StrCat("source ", path, (*canonical == path ? "" : absl::StrCat(" (", *canonical, ")")),
                   " is outside this granaryd's source roots (", absl::StrJoin(roots_, ", "),
                   "); an administrator adds roots in granaryd's config (source_roots)"));
}

}  // namespace granary
