#include "common/base/memory_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"

namespace granary {

absl::StatusOr<MemoryFile> MemoryFile::Create(const char* name, uint64_t size) {
  UniqueFd fd(::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return ErrnoStatus(errno, "memfd_create");
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
    return ErrnoStatus(errno, absl::StrCat("sizing a memory file to ", size, " bytes"));
  }
  return MemoryFile(std::move(fd), size);
}

absl::Status MemoryFile::Write(uint64_t offset, std::string_view bytes) {
  if (offset > size_ || bytes.size() > size_ - offset) {
    return absl::OutOfRangeError(absl::StrCat("writing ", bytes.size(), " bytes at ", offset,
                                              " into a memory file of ", size_));
  }
  while (!bytes.empty()) {
    const ssize_t written =
        ::pwrite(fd_.get(), bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (written < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "writing a memory file");
    }
    bytes.remove_prefix(static_cast<size_t>(written));
    offset += static_cast<uint64_t>(written);
  }
  return absl::OkStatus();
}

absl::Status MemoryFile::Seal(int seals) {
  if (::fcntl(fd_.get(), F_ADD_SEALS, seals) != 0) {
    return ErrnoStatus(errno, "sealing a memory file");
  }
  return absl::OkStatus();
}

bool MemoryFile::HasSeals(int fd, int seals) {
  const int held = ::fcntl(fd, F_GET_SEALS);
  return held >= 0 && (held & seals) == seals;
}

}  // namespace granary
