#include "cache_server/store/segment_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status.h"

namespace granary::store {
namespace {

constexpr std::string_view kPrefix = "segment-";
constexpr std::string_view kSuffix = ".dat";
constexpr size_t kIdDigits = 16;

}  // namespace

std::string SegmentFile::FileName(uint64_t id) { return absl::StrFormat("segment-%016x.dat", id); }

std::optional<uint64_t> SegmentFile::ParseFileName(std::string_view name) {
  if (name.size() != kPrefix.size() + kIdDigits + kSuffix.size() || !name.starts_with(kPrefix) ||
      !name.ends_with(kSuffix)) {
    return std::nullopt;
  }
  const char* first = name.data() + kPrefix.size();
  const char* last = first + kIdDigits;
  uint64_t id = 0;
  auto [end, error] = std::from_chars(first, last, id, 16);
  if (error != std::errc() || end != last) return std::nullopt;
  return id;
}

absl::StatusOr<std::unique_ptr<SegmentFile>> SegmentFile::Create(const std::string& directory,
                                                                 uint64_t id, bool direct_io) {
  return OpenWithFlags(directory, id, O_RDWR | O_CREAT | O_EXCL, direct_io);
}

absl::StatusOr<std::unique_ptr<SegmentFile>> SegmentFile::Open(const std::string& directory,
                                                               uint64_t id, bool direct_io) {
  return OpenWithFlags(directory, id, O_RDWR, direct_io);
}

absl::StatusOr<std::unique_ptr<SegmentFile>> SegmentFile::OpenWithFlags(
    const std::string& directory, uint64_t id, int flags, bool direct_io) {
  std::string path = absl::StrCat(directory, "/", FileName(id));
  flags |= O_CLOEXEC;
  int fd = -1;
  if (direct_io) {
    fd = ::open(path.c_str(), flags | O_DIRECT, 0600);
    if (fd < 0 && errno == EINVAL) {
      GRANARY_LOG_FIRST_N(WARNING, 1)
          << "chunk store: " << directory << " does not support O_DIRECT; using buffered I/O";
      direct_io = false;
    } else if (fd < 0) {
      return ErrnoStatus(errno, absl::StrCat("open segment ", path));
    }
  }
  if (fd < 0) fd = ::open(path.c_str(), flags, 0600);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("open segment ", path));
  return std::unique_ptr<SegmentFile>(new SegmentFile(id, fd, direct_io, std::move(path)));
}

SegmentFile::~SegmentFile() { ::close(fd_); }

absl::StatusOr<uint64_t> SegmentFile::Size() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return ErrnoStatus(errno, absl::StrCat("stat ", path_));
  return static_cast<uint64_t>(st.st_size);
}

absl::Status SegmentFile::Truncate(uint64_t size) {
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    return ErrnoStatus(errno, absl::StrCat("truncate ", path_));
  }
  return absl::OkStatus();
}

absl::Status SegmentFile::Sync() {
  if (::fdatasync(fd_) != 0) return ErrnoStatus(errno, absl::StrCat("fdatasync ", path_));
  return absl::OkStatus();
}

absl::Status SegmentFile::Unlink() {
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus(errno, absl::StrCat("unlink ", path_));
  }
  return absl::OkStatus();
}

}  // namespace granary::store
