#include "cache_server/store/pread_io_engine.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"

namespace granary::store {
namespace {

class PreadIoEngine final : public IoEngine {
 public:
  absl::Status Read(int fd, bool direct, uint64_t offset, std::span<char> dest,
                    PieceSink on_piece) override;
  absl::Status Write(int fd, bool direct, uint64_t offset, std::span<const char> src) override;
  std::string_view name() const override { return "pread"; }
};

absl::Status PreadIoEngine::Read(int fd, bool direct, uint64_t offset, std::span<char> dest,
                                 PieceSink on_piece) {
  const uint64_t piece_bytes = PieceBytes(direct);
  uint64_t done = 0;
  while (done < dest.size()) {
    const uint64_t piece = std::min<uint64_t>(piece_bytes, dest.size() - done);
    uint64_t landed = 0;
    while (landed < piece) {
      const ssize_t n = ::pread(fd, dest.data() + done + landed, piece - landed,
                                static_cast<off_t>(offset + done + landed));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoStatus(errno, "pread of a data file");
      if (n == 0) {
        return absl::DataLossError(
            absl::StrCat("data file ends at ", offset + done + landed, ", inside a chunk"));
      }
      landed += static_cast<uint64_t>(n);
    }
    on_piece(dest.data() + done, piece);
    done += piece;
  }
  return absl::OkStatus();
}

absl::Status PreadIoEngine::Write(int fd, bool /*direct*/, uint64_t offset,
                                  std::span<const char> src) {
  uint64_t done = 0;
  while (done < src.size()) {
    const ssize_t n =
        ::pwrite(fd, src.data() + done, src.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, "pwrite of a data file");
    done += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

std::unique_ptr<IoEngine> NewPreadIoEngine() { return std::make_unique<PreadIoEngine>(); }

}  // namespace granary::store
