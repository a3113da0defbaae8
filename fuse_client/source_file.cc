#include "fuse_client/source_file.h"

#include "absl/strings/str_cat.h"
#include "common/source_path.h"
#include "common/status.h"

namespace granary::fuse {

std::string SourceFile::Path() const {
  absl::StatusOr<std::string> root = PosixRootOf(source_);
  if (!root.ok()) return std::string(source_);
  return entry_.path.empty() ? *root
                             : absl::StrCat(*root, root->ends_with('/') ? "" : "/", entry_.path);
}

absl::StatusOr<const VerifiedSourceFile*> SourceFile::Open() {
  std::lock_guard lock(mutex_);
  if (file_) return &*file_;
  GRANARY_RETURN_IF_ERROR(open_status_);
  GRANARY_ASSIGN_OR_RETURN(std::string root, PosixRootOf(source_));
  absl::StatusOr<VerifiedSourceFile> file = VerifiedSourceFile::Open(root, entry_);
  if (!file.ok()) {
    if (absl::IsFailedPrecondition(file.status())) open_status_ = file.status();
    return file.status();
  }
  file_.emplace(*std::move(file));
  return &*file_;
}

absl::Status SourceFile::ReadExactly(uint64_t offset, std::span<char> out) {
  GRANARY_ASSIGN_OR_RETURN(const VerifiedSourceFile* file, Open());
  return file->ReadExactly(offset, out);
}

}  // namespace granary::fuse
