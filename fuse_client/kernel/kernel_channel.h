// KernelChannel is granary-fuse's side of its /dev/fuse connection, below
// libfuse: every request libfuse reads and every reply it writes pass through
// it (libfuse's custom I/O hooks), which lets granary-fuse use what Debian
// 12's libfuse 3.14 has no API for, FUSE passthrough (Linux 6.9 and later):
//  - at INIT it asks the kernel for passthrough when the kernel offers it, by
//    adding FUSE_PASSTHROUGH and a stacking depth of 1 to libfuse's reply;
//  - it registers backing files with the kernel (FUSE_DEV_IOC_BACKING_OPEN)
//    and forgets them (FUSE_DEV_IOC_BACKING_CLOSE);
//  - it answers an OPEN with FOPEN_PASSTHROUGH and a backing id, after which
//    the kernel serves read() and mmap() of that file from the backing file
//    itself, with no request to granary-fuse.
// Writing the few protocol fields by hand keeps the build on Debian's own
// libfuse; the layouts used are those of the kernel's uapi <linux/fuse.h>
// (protocol 7.40), which Debian 12's kernel headers predate.
//
// Passthrough is off (and every open goes through granary-fuse) when the
// kernel does not offer it, when it was not asked for, and once a backing
// file cannot be registered for lack of privilege (CAP_SYS_ADMIN).
//
// Thread-safety: the hooks run on libfuse's worker threads; every method
// may be called concurrently once Attach() has returned.
#ifndef GRANARY_FUSE_CLIENT_KERNEL_KERNEL_CHANNEL_H_
#define GRANARY_FUSE_CLIENT_KERNEL_KERNEL_CHANNEL_H_

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/base/mutex.h"

namespace granary::fuse {

class KeeperLink;

class KernelChannel {
 public:
  // `want_passthrough`: ask the kernel for passthrough when it offers it.
  // `keeper`, unless null, journals the INIT and the backing ids (it must
  // outlive the channel).
  KernelChannel(bool want_passthrough, KeeperLink* keeper)
      : want_passthrough_(want_passthrough), keeper_(keeper) {}
  KernelChannel(const KernelChannel&) = delete;
  KernelChannel& operator=(const KernelChannel&) = delete;

  // Routes the I/O of `session`, mounted already, through `hooks`, which
  // call Read() and Writev() of this channel; before the session loop
  // starts, so that INIT passes through it.
  absl::Status Attach(fuse_session* session, const fuse_custom_io& hooks);

  // Whether the kernel agreed to passthrough at INIT and no registration has
  // been refused for lack of privilege since.
  bool passthrough() const { return passthrough_.load(std::memory_order_relaxed); }

  // Taking over a connection whose INIT an earlier process answered: the
  // first Read() returns `init_request` (that INIT, as read then) so that
  // libfuse sets itself up as it did, and its reply is not sent, since the
  // kernel has had one; other reads wait until libfuse has answered it.
  // Before the session loop starts.
  void ReplayInit(std::string init_request);
  // Asks the kernel to send again every request it sent and had no answer
  // to (FUSE_NOTIFY_RESEND, Linux 6.9 and later): those an earlier process
  // read before it died.
  absl::Status ResendUnanswered();

  // Registers `fd` (a regular file, read-only) as a backing file; the id it
  // returns names it in ReplyOpenPassthrough. The kernel keeps its own
  // reference to the file, so `fd` may be closed afterwards. FAILED_PRECONDITION
  // when passthrough is off or the kernel refuses the file.
  absl::StatusOr<int32_t> RegisterBacking(int fd);
  // Forgets backing id `id`; files opened with it keep their backing file.
  void UnregisterBacking(int32_t id);
  // The same on connection `fuse_fd`, for whoever holds it; the errno, or 0.
  static int ForgetBacking(int fuse_fd, int32_t id);

  // Answers OPEN `req` with file handle `fh`, passed through to backing id
  // `backing_id`. As fuse_reply_open(): -ENOENT when the open was
  // interrupted and the kernel did not take the reply.
  static int ReplyOpenPassthrough(fuse_req_t req, uint64_t fh, int32_t backing_id);

  // libfuse's custom I/O hooks (fuse_custom_io), reached through GranaryFs.
  ssize_t Read(int fd, void* buffer, size_t size);
  ssize_t Writev(int fd, struct iovec* iov, int count);

 private:
  // Notes what an INIT request among those read says.
  void Inspect(const void* request, size_t size);

  const bool want_passthrough_;
  KeeperLink* const keeper_;
  int fd_ = -1;
  // The INIT request, from its read until its answer is journaled.
  Mutex init_mutex_;
  std::string init_request_ ABSL_GUARDED_BY(init_mutex_);
  // ReplayInit(): the request to return, and whether libfuse answered it.
  std::string replayed_init_;
  std::atomic<bool> replay_pending_{false};
  std::atomic<bool> replay_answered_{true};
  std::atomic<uint64_t> init_unique_{0};  // The INIT request's, until answered.
  std::atomic<bool> kernel_offers_passthrough_{false};
  std::atomic<bool> passthrough_{false};
  std::atomic<bool> refusal_logged_{false};
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_KERNEL_KERNEL_CHANNEL_H_
