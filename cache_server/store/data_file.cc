#include "cache_server/store/data_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/logging.h"
#include "common/base/status.h"

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
                                                           uint64_t id, bool direct_io,
                                                           DescriptorCache* descriptors) {
  return OpenWithFlags(directory, id, O_RDWR | O_CREAT | O_EXCL, direct_io, descriptors);
}

absl::StatusOr<std::unique_ptr<DataFile>> DataFile::Open(const std::string& directory, uint64_t id,
                                                         bool direct_io,
                                                         DescriptorCache* descriptors) {
  return OpenWithFlags(directory, id, O_RDWR, direct_io, descriptors);
}

// Opened once here, whatever the cache keeps, so that a missing file fails
// now and O_DIRECT is settled for the file's life.
absl::StatusOr<std::unique_ptr<DataFile>> DataFile::OpenWithFlags(const std::string& directory,
                                                                  uint64_t id, int flags,
                                                                  bool direct_io,
                                                                  DescriptorCache* descriptors) {
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
  descriptors->Add(id, std::make_shared<const UniqueFd>(fd));
  return std::unique_ptr<DataFile>(new DataFile(id, direct_io, std::move(path), descriptors));
}

DataFile::~DataFile() { descriptors_->Forget(id_); }

absl::StatusOr<UniqueFd> DataFile::OpenForDirectWrites() const {
  UniqueFd fd(::open(path_.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC));
  if (!fd.valid()) {
    return ErrnoStatus(errno, absl::StrCat("open data file ", path_, " for O_DIRECT"));
  }
  return fd;
}

int DataFile::ReopenFlags() const { return O_RDWR | (direct_io_ ? O_DIRECT : 0); }

absl::StatusOr<SharedFd> DataFile::Descriptor() const {
  return descriptors_->Get(id_, path_, ReopenFlags());
}

absl::StatusOr<struct stat> DataFile::Stat() const {
  GRANARY_ASSIGN_OR_RETURN(SharedFd fd, Descriptor());
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return ErrnoStatus(errno, absl::StrCat("stat ", path_));
  return st;
}

absl::Status DataFile::Truncate(uint64_t size) {
  GRANARY_ASSIGN_OR_RETURN(SharedFd fd, Descriptor());
  if (::ftruncate(fd->get(), static_cast<off_t>(size)) != 0) {
    return ErrnoStatus(errno, absl::StrCat("truncate ", path_));
  }
  return absl::OkStatus();
}

absl::Status DataFile::Sync() {
  GRANARY_ASSIGN_OR_RETURN(SharedFd fd, Descriptor());
  if (::fdatasync(fd->get()) != 0) return ErrnoStatus(errno, absl::StrCat("fdatasync ", path_));
  return absl::OkStatus();
}

absl::Status DataFile::SyncFilesystem() {
  GRANARY_ASSIGN_OR_RETURN(SharedFd fd, Descriptor());
  if (::syncfs(fd->get()) != 0) return ErrnoStatus(errno, absl::StrCat("syncfs of ", path_));
  return absl::OkStatus();
}

absl::Status DataFile::Unlink() {
  descriptors_->Forget(id_);
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus(errno, absl::StrCat("unlink ", path_));
  }
  return absl::OkStatus();
}

}  // namespace granary::store
