#include "common/source_access/verified_source_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/absl_compat.h"
#include "common/base/file_util.h"
#include "common/base/status.h"
#include "common/source_access/source_path.h"

namespace granary {
namespace {

int64_t Nanoseconds(const struct timespec& time) {
  return static_cast<int64_t>(time.tv_sec) * 1'000'000'000 + time.tv_nsec;
}

absl::Status Stale(const ManifestEntry& entry, std::string_view what) {
  return absl::FailedPreconditionError(
      absl::StrCat("source file '", entry.path, "' ", AsAbsl(what), "; refresh the dataset"));
}

}  // namespace

absl::StatusOr<SourceFileMatch> CheckSameFile(const struct stat& st, const ManifestEntry& entry) {
  if (!S_ISREG(st.st_mode)) return Stale(entry, "is no longer a regular file");
  std::vector<std::string> changes;
  auto compare = [&changes](std::string_view field, auto recorded, auto now) {
    if (static_cast<int64_t>(recorded) != static_cast<int64_t>(now)) {
      changes.push_back(absl::StrCat(AsAbsl(field), " ", recorded, " -> ", now));
    }
  };
  compare("device", entry.device(), static_cast<uint64_t>(st.st_dev));
  compare("inode", entry.inode, static_cast<uint64_t>(st.st_ino));
  compare("size", entry.size, static_cast<uint64_t>(st.st_size));
  compare("mtime_ns", entry.mtime_ns, Nanoseconds(st.st_mtim));
  if (changes.empty()) {
    return entry.ctime_ns == Nanoseconds(st.st_ctim) ? SourceFileMatch::kAsRecorded
                                                     : SourceFileMatch::kMetadataChanged;
  }
  return Stale(entry, absl::StrCat("is not the file the manifest recorded (",
                                   absl::StrJoin(changes, ", "), ")"));
}

absl::StatusOr<VerifiedSourceFile> VerifiedSourceFile::Open(std::string_view root,
                                                            const ManifestEntry& entry) {
  const std::string root_path(root);
  UniqueFd root_fd(::open(root_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd.valid()) {
    int error = errno;
    if (error == ENOENT || error == ENOTDIR) {
      return Stale(
          entry, absl::StrCat("is gone: its source root ", root_path, " is no longer a directory"));
    }
    return ErrnoStatus(error,
                       absl::StrCat("source root ", root_path, " of file '", entry.path, "'"));
  }
  // O_NONBLOCK: a FIFO put where the file was must not block the open; the
  // check below then refuses it.
  absl::StatusOr<UniqueFd> fd = OpenBeneath(root_fd.get(), entry.path, O_RDONLY | O_NONBLOCK);
  if (!fd.ok()) {
    if (absl::IsNotFound(fd.status())) {
      return Stale(entry, absl::StrCat("no longer exists under ", root_path));
    }
    return absl::Status(fd.status().code(),
                        absl::StrCat("source root ", root_path, ": ", fd.status().message()));
  }
  VerifiedSourceFile file(*std::move(fd), entry);
  GRANARY_ASSIGN_OR_RETURN(SourceFileMatch match, file.CheckStillSame());
  file.metadata_changed_ = match == SourceFileMatch::kMetadataChanged;
  return file;
}

absl::StatusOr<SourceFileMatch> VerifiedSourceFile::CheckStillSame() const {
  struct stat st;
  if (::fstat(fd_.get(), &st) != 0) {
    return ErrnoStatus(errno, absl::StrCat("stat source file '", entry_->path, "'"));
  }
  return CheckSameFile(st, *entry_);
}

absl::Status VerifiedSourceFile::ReadExactly(uint64_t offset, std::span<char> out) const {
  absl::StatusOr<size_t> read = PreadUntilFullOrEnd(
      fd_.get(), offset, out, absl::StrCat("read source file '", entry_->path, "'"));
  if (!read.ok()) return read.status();
  if (*read < out.size()) {
    return Stale(*entry_, absl::StrCat("shrank below ", offset + out.size(), " bytes"));
  }
  // A change during the read would mix bytes of two versions; this check
  // catches it, as the one at Open caught a change before.
  return CheckStillSame().status();
}

}  // namespace granary
