#include "cache_server/read_path/source_journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/absl_compat.h"
#include "common/base/logging.h"
#include "common/base/printable.h"
#include "common/base/status.h"

namespace granary {
namespace {

constexpr mode_t kJournalMode = 0640;

std::string Seconds(std::chrono::system_clock::time_point when) {
  const int64_t micros =
      std::chrono::duration_cast<std::chrono::microseconds>(when.time_since_epoch()).count();
  return absl::StrFormat("%d.%06d", micros / 1'000'000, micros % 1'000'000);
}

// The fields every line opens with.
std::string Opening(std::string_view event, uint64_t dataset_version, uint64_t file_id) {
  return absl::StrCat("{\"t\":", Seconds(std::chrono::system_clock::now()), ",\"event\":\"",
                      AsAbsl(event), "\",\"version\":\"", FormatVersion(dataset_version),
                      "\",\"file\":", file_id);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SourceJournal>> SourceJournal::Open(const std::string& path) {
  if (path.empty() || path.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("source_journal '", Printable(path), "' is not an absolute path"));
  }
  constexpr int kFlags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW;
  // A journal made now gets its mode whatever the umask; one that exists
  // keeps the mode its administrator gave it.
  UniqueFd fd(::open(path.c_str(), kFlags | O_CREAT | O_EXCL, kJournalMode));
  const bool created = fd.valid();
  if (!created && errno == EEXIST) fd = UniqueFd(::open(path.c_str(), kFlags));
  if (!fd.valid() || (created && ::fchmod(fd.get(), kJournalMode) != 0)) {
    return ErrnoStatus(errno, absl::StrCat("source_journal ", Printable(path)));
  }
  return std::unique_ptr<SourceJournal>(new SourceJournal(path, std::move(fd)));
}

void SourceJournal::SourceRead(std::string_view dataset, const ChunkKey& key, uint64_t offset,
                               uint64_t length, ReadFor read_for,
                               std::chrono::system_clock::time_point began) {
  Append(absl::StrCat(Opening("source_read", key.dataset_version, key.file_id), ",\"dataset\":\"",
                      AsAbsl(dataset), "\",\"chunk\":", key.chunk_index, ",\"offset\":", offset,
                      ",\"length\":", length, ",\"for\":\"",
                      read_for == ReadFor::kReader ? "reader" : "fill",
                      "\",\"began\":", Seconds(began), "}\n"));
}

void SourceJournal::Kept(const ChunkKey& key, uint64_t offset, uint64_t length) {
  Append(absl::StrCat(Opening("kept", key.dataset_version, key.file_id), ",\"chunk\":",
                      key.chunk_index, ",\"offset\":", offset, ",\"length\":", length, "}\n"));
}

void SourceJournal::Withdrawn(uint64_t dataset_version, uint64_t file_id) {
  Append(absl::StrCat(Opening("withdrawn", dataset_version, file_id), "}\n"));
}

void SourceJournal::Append(const std::string& line) {
  const ssize_t written = ::write(fd_.get(), line.data(), line.size());
  if (written == static_cast<ssize_t>(line.size())) return;
  const int error = written < 0 ? errno : ENOSPC;
  if (!write_failed_.exchange(true)) {
    GRANARY_LOG(ERROR) << "source_journal " << Printable(path_)
                       << ": a line was lost, and later ones may be: " << std::strerror(error);
  }
}

}  // namespace granary
