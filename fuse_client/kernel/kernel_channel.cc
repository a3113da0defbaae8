#include "fuse_client/kernel/kernel_channel.h"

#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "fuse_client/restarts/keeper_link.h"

namespace granary::fuse {
namespace {

// The parts of the kernel's FUSE protocol (uapi <linux/fuse.h>, 7.40) that
// Debian 12's headers and libfuse 3.14 lack or keep private.
constexpr uint32_t kOpcodeInit = 26;
constexpr uint32_t kNotifyResend = 7;  // FUSE_NOTIFY_RESEND, as an out header's error.
constexpr uint64_t kReplayedUnique = 1;
constexpr uint32_t kInitExt = 1u << 30;           // FUSE_INIT_EXT: flags2 is valid.
constexpr uint32_t kPassthroughFlags2 = 1u << 5;  // FUSE_PASSTHROUGH (1ULL << 37).
constexpr uint32_t kOpenPassthrough = 1u << 7;    // FOPEN_PASSTHROUGH.
constexpr uint32_t kOpenNoFlush = 1u << 5;        // FOPEN_NOFLUSH.

constexpr size_t kInHeaderBytes = 40;   // struct fuse_in_header.
constexpr size_t kOutHeaderBytes = 16;  // struct fuse_out_header.
// Offsets into struct fuse_in_header, fuse_init_in and fuse_init_out.
constexpr size_t kInOpcode = 4;
constexpr size_t kInUnique = 8;
constexpr size_t kInitInFlags = 12;
constexpr size_t kInitInFlags2 = 16;
constexpr size_t kOutError = 4;
constexpr size_t kOutUnique = 8;
constexpr size_t kInitOutFlags = 12;
constexpr size_t kInitOutFlags2 = 32;
constexpr size_t kInitOutMaxStackDepth = 36;
constexpr size_t kInitOutBytes = 64;

struct BackingMap {  // struct fuse_backing_map.
  int32_t fd;
  uint32_t flags;
  uint64_t padding;
};
struct OpenOut {  // struct fuse_open_out.
  uint64_t fh;
  uint32_t open_flags;
  int32_t backing_id;
};
static_assert(sizeof(BackingMap) == 16 && sizeof(OpenOut) == 16);

constexpr unsigned kDevIocMagic = 229;
const unsigned long kBackingOpen = _IOW(kDevIocMagic, 1, BackingMap);
const unsigned long kBackingClose = _IOW(kDevIocMagic, 2, uint32_t);

template <typename T>
T Load(const char* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

// The byte at `offset` of the message `iov` holds, or nullptr past its end.
char* ByteAt(struct iovec* iov, int count, size_t offset) {
  for (int i = 0; i < count; ++i) {
    if (offset < iov[i].iov_len) return static_cast<char*>(iov[i].iov_base) + offset;
    offset -= iov[i].iov_len;
  }
  return nullptr;
}

// Reads the 4-byte field at `offset` of the message, across iovec bounds.
bool LoadField(struct iovec* iov, int count, size_t offset, uint32_t* value) {
  char bytes[4];
  for (size_t i = 0; i < 4; ++i) {
    const char* at = ByteAt(iov, count, offset + i);
    if (at == nullptr) return false;
    bytes[i] = *at;
  }
  std::memcpy(value, bytes, 4);
  return true;
}

void StoreField(struct iovec* iov, int count, size_t offset, uint32_t value) {
  char bytes[4];
  std::memcpy(bytes, &value, 4);
  for (size_t i = 0; i < 4; ++i) *ByteAt(iov, count, offset + i) = bytes[i];
}

}  // namespace

absl::Status KernelChannel::Attach(fuse_session* session, const fuse_custom_io& hooks) {
  fd_ = fuse_session_fd(session);
  if (int error = fuse_session_custom_io(session, &hooks, fd_); error != 0) {
    return absl::InternalError(
        absl::StrCat("cannot route the FUSE connection's I/O: ", std::strerror(-error)));
  }
  return absl::OkStatus();
}

void KernelChannel::ReplayInit(std::string init_request) {
  if (init_request.size() < kInHeaderBytes) return;
  replayed_init_ = std::move(init_request);
  // An odd unique: the kernel numbers its requests in even steps.
  std::memcpy(replayed_init_.data() + kInUnique, &kReplayedUnique, sizeof(kReplayedUnique));
  replay_answered_ = false;
  replay_pending_ = true;
}

absl::Status KernelChannel::ResendUnanswered() {
  const uint32_t header[4] = {kOutHeaderBytes, kNotifyResend, 0, 0};
  if (::write(fd_, header, sizeof(header)) != static_cast<ssize_t>(sizeof(header))) {
    return absl::UnavailableError(absl::StrCat(
        "the kernel cannot resend the requests an earlier granary-fuse left unanswered (",
        std::strerror(errno), "; Linux 6.9 or later can): readers of those may wait"));
  }
  return absl::OkStatus();
}

ssize_t KernelChannel::Read(int fd, void* buffer, size_t size) {
  if (replay_pending_.exchange(false)) {
    std::memcpy(buffer, replayed_init_.data(), std::min(size, replayed_init_.size()));
    Inspect(buffer, replayed_init_.size());
    return static_cast<ssize_t>(replayed_init_.size());
  }
  replay_answered_.wait(false);
  const ssize_t got = ::read(fd, buffer, size);
  if (got > 0) Inspect(buffer, static_cast<size_t>(got));
  return got;
}

void KernelChannel::Inspect(const void* request, size_t size) {
  if (size < kInHeaderBytes + kInitInFlags2 + 4) return;
  const char* bytes = static_cast<const char*>(request);
  if (Load<uint32_t>(bytes + kInOpcode) != kOpcodeInit) return;
  const uint32_t flags = Load<uint32_t>(bytes + kInHeaderBytes + kInitInFlags);
  const uint32_t flags2 =
      (flags & kInitExt) != 0 ? Load<uint32_t>(bytes + kInHeaderBytes + kInitInFlags2) : 0;
  kernel_offers_passthrough_ = (flags2 & kPassthroughFlags2) != 0;
  {
    MutexLock lock(&init_mutex_);
    init_request_.assign(bytes, size);
  }
  init_unique_ = Load<uint64_t>(bytes + kInUnique);
}

ssize_t KernelChannel::Writev(int fd, struct iovec* iov, int count) {
  const uint64_t init_unique = init_unique_.load(std::memory_order_relaxed);
  uint32_t unique_low = 0;
  uint32_t unique_high = 0;
  uint32_t error = 0;
  if (init_unique != 0 && LoadField(iov, count, kOutUnique, &unique_low) &&
      LoadField(iov, count, kOutUnique + 4, &unique_high) &&
      ((uint64_t{unique_high} << 32) | unique_low) == init_unique) {
    init_unique_ = 0;
    uint32_t flags = 0;
    uint32_t flags2 = 0;
    const bool whole_reply = ByteAt(iov, count, kOutHeaderBytes + kInitOutBytes - 1) != nullptr;
    if (whole_reply && LoadField(iov, count, kOutError, &error) && error == 0 &&
        LoadField(iov, count, kOutHeaderBytes + kInitOutFlags, &flags) &&
        LoadField(iov, count, kOutHeaderBytes + kInitOutFlags2, &flags2) &&
        (flags & kInitExt) != 0 && want_passthrough_ && kernel_offers_passthrough_) {
      StoreField(iov, count, kOutHeaderBytes + kInitOutFlags2, flags2 | kPassthroughFlags2);
      // The cache's files lie on an ordinary filesystem, one level below.
      StoreField(iov, count, kOutHeaderBytes + kInitOutMaxStackDepth, 1);
      passthrough_ = true;
    }
    GRANARY_LOG(INFO) << "FUSE passthrough "
                      << (passthrough_ ? "on"
                          : !want_passthrough_
                              ? "off (--no-passthrough)"
                              : "off (the kernel does not offer it; Linux 6.9 or later has it)");
    if (init_unique == kReplayedUnique) {
      replay_answered_ = true;
      replay_answered_.notify_all();
      ssize_t total = 0;
      for (int i = 0; i < count; ++i) total += static_cast<ssize_t>(iov[i].iov_len);
      return total;
    }
    const ssize_t written = ::writev(fd, iov, count);
    MutexLock lock(&init_mutex_);
    if (written > 0 && error == 0 && keeper_ != nullptr) keeper_->InitAnswered(init_request_);
    init_request_.clear();
    return written;
  }
  return ::writev(fd, iov, count);
}

absl::StatusOr<int32_t> KernelChannel::RegisterBacking(int fd) {
  if (!passthrough()) return absl::FailedPreconditionError("FUSE passthrough is off");
  BackingMap map{.fd = fd, .flags = 0, .padding = 0};
  const int id = ::ioctl(fd_, kBackingOpen, &map);
  if (id > 0) {
    if (keeper_ != nullptr) keeper_->BackingOpened(id);
    return id;
  }
  const int error = id < 0 ? errno : EINVAL;
  if (error == EPERM) {
    // Registering needs CAP_SYS_ADMIN: without it, no file can be passed through.
    passthrough_ = false;
    GRANARY_LOG(WARNING) << "FUSE passthrough off: the kernel refuses backing files ("
                         << std::strerror(error)
                         << "; granary-fuse needs CAP_SYS_ADMIN); reading through granary-fuse";
  } else if (!refusal_logged_.exchange(true)) {
    GRANARY_LOG(WARNING) << "the kernel refused a backing file (" << std::strerror(error)
                         << "); such files are read through granary-fuse";
  }
  return absl::FailedPreconditionError(
      absl::StrCat("the kernel refused a backing file: ", std::strerror(error)));
}

void KernelChannel::UnregisterBacking(int32_t id) {
  if (keeper_ != nullptr) keeper_->BackingClosed(id);
  if (int error = ForgetBacking(fd_, id); error != 0) {
    GRANARY_LOG_FIRST_N(WARNING, 10)
        << "cannot forget backing file " << id << ": " << std::strerror(error);
  }
}

int KernelChannel::ForgetBacking(int fuse_fd, int32_t id) {
  uint32_t backing_id = static_cast<uint32_t>(id);
  return ::ioctl(fuse_fd, kBackingClose, &backing_id) == 0 ? 0 : errno;
}

int KernelChannel::ReplyOpenPassthrough(fuse_req_t req, uint64_t fh, int32_t backing_id) {
  // No FLUSH at close, as for files read through granary-fuse: nothing is
  // written, and a close must not wait for a granary-fuse being restarted.
  const OpenOut out{
      .fh = fh, .open_flags = kOpenPassthrough | kOpenNoFlush, .backing_id = backing_id};
  return fuse_reply_buf(req, reinterpret_cast<const char*>(&out), sizeof(out));
}

}  // namespace granary::fuse
