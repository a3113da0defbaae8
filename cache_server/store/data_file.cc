#include "cache_server/store/data_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status.h"

namespace granary::store {
namespace {

constexpr std::string_view kSuffix = ".dat";
constexpr size_t kIdDigits = 16;

}  // namespace

std::string DataFile::SubdirectoryName(int index) { return absl::StrFormat("%02x", index); }

std::string DataFile::RelativePath(uint64_t id) {
  return absl::StrFormat("%02x/%016x.dat", id % kSubdirectories, id);
}

std::optional<uint64_t> DataFile::ParseFileName(std::string_view name) {
  if (name.size() != kIdDigits + kSuffix.size() || !name.ends_with(kSuffix)) return std::nullopt;
  const char* first = name.data();
  const char* last = first + kIdDigits;
  uint64_t id = 0;
  auto [end, error] = std::from_chars(first, last, id, 16);
  if (error != std::errc() || end != last) return std::nullopt;
  return id;
}

absl::StatusOr<std::unique_ptr<DataFile>> DataFile::Create(const std::string& directory,
                                                           uint64_t id, bool direct_io) {
  return OpenWithFlags(directory, id, O_RDWR | O_CREAT | O_EXCL, direct_io);
}

absl::StatusOr<std::unique_ptr<DataFile>> DataFile::Open(const std::string& directory, uint64_t id,
                                                         bool direct_io) {
  return OpenWithFlags(directory, id, O_RDWR, direct_io);
}

absl::StatusOr<std::unique_ptr<DataFile>> DataFile::OpenWithFlags(const std::string& directory,
                                                                  uint64_t id, int flags,
                                                                  bool direct_io) {
  std::string path = absl::StrCat(directory, "/", RelativePath(id));
  flags |= O_CLOEXEC;
  int fd = -1;
  if (direct_io) {
    fd = ::open(path.c_str(), flags | O_DIRECT, 0600);
    if (fd < 0 && errno == EINVAL) {
      GRANARY_LOG_FIRST_N(WARNING, 1)
          << "chunk store: " << directory << " does not support O_DIRECT; using buffered I/O";
      direct_io = false;
    } else if (fd < 0) {
      return ErrnoStatus(errno, absl::StrCat("open data file ", path));
    }
  }
  if (fd < 0) fd = ::open(path.c_str(), flags, 0600);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("open data file ", path));
  return std::unique_ptr<DataFile>(new DataFile(id, fd, direct_io, std::move(path)));
}

DataFile::~DataFile() { ::close(fd_); }

absl::StatusOr<struct stat> DataFile::Stat() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return ErrnoStatus(errno, absl::StrCat("stat ", path_));
  return st;
}

absl::Status DataFile::Truncate(uint64_t size) {
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    return ErrnoStatus(errno, absl::StrCat("truncate ", path_));
  }
  return absl::OkStatus();
}

absl::Status DataFile::Sync() {
  if (::fdatasync(fd_) != 0) return ErrnoStatus(errno, absl::StrCat("fdatasync ", path_));
  return absl::OkStatus();
}

absl::Status DataFile::SyncFilesystem() {
  if (::syncfs(fd_) != 0) return ErrnoStatus(errno, absl::StrCat("syncfs of ", path_));
  return absl::OkStatus();
}

absl::Status DataFile::Unlink() {
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus(errno, absl::StrCat("unlink ", path_));
  }
  return absl::OkStatus();
}

}  // namespace granary::store
