#include "client/whole_file_reads.h"

#include <liburing.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/file_util.h"
#include "common/base/status.h"

namespace granary {
namespace {

// Reads larger than this are split, so that one large file does not hold a
// slot of the queue for the whole of its read.
constexpr uint64_t kMaxPieceBytes = 1 << 20;

class ThreadRing {
 public:
  ~ThreadRing() { Close(); }
  // This thread's ring, or null when the kernel refuses one.
  io_uring* Get() {
    if (owner_ != ::getpid()) {
      // Made before a fork: the child's mapping is dropped, not used.
      if (owner_ != 0) Close();
      owner_ = ::getpid();
      ready_ = io_uring_queue_init(kWholeFileQueueDepth, &ring_, 0) == 0;
    }
    return ready_ ? &ring_ : nullptr;
  }

 private:
  void Close() {
    if (ready_) io_uring_queue_exit(&ring_);
    ready_ = false;
  }
  io_uring ring_{};
  pid_t owner_ = 0;
  bool ready_ = false;
};

void ReadOneByOne(std::span<WholeFileRead> reads) {
  for (WholeFileRead& read : reads) {
    absl::StatusOr<size_t> got =
        PreadUntilFullOrEnd(read.fd, 0, {read.out, read.size}, "reading a whole file");
    read.status = !got.ok() ? got.status()
                  : *got == read.size
                      ? absl::OkStatus()
                      : absl::DataLossError(absl::StrCat("a whole file ended at ", *got, " of ",
                                                         read.size, " bytes"));
  }
}

}  // namespace

void ReadWholeFiles(std::span<WholeFileRead> reads) {
  thread_local ThreadRing thread_ring;
  io_uring* ring = thread_ring.Get();
  if (ring == nullptr) return ReadOneByOne(reads);

  // What is left of each file's read: its next offset.
  std::vector<uint64_t> done(reads.size(), 0);
  std::vector<size_t> waiting;  // Files with bytes left and no read in flight.
  for (size_t i = 0; i < reads.size(); ++i) {
    reads[i].status = absl::OkStatus();
    if (reads[i].size > 0) waiting.push_back(i);
  }
  std::reverse(waiting.begin(), waiting.end());
  unsigned in_flight = 0;
  while (!waiting.empty() || in_flight > 0) {
    while (!waiting.empty() && in_flight < kWholeFileQueueDepth) {
      io_uring_sqe* sqe = io_uring_get_sqe(ring);
      if (sqe == nullptr) break;
      const size_t i = waiting.back();
      waiting.pop_back();
      const uint64_t length = std::min(reads[i].size - done[i], kMaxPieceBytes);
      io_uring_prep_read(sqe, reads[i].fd, reads[i].out + done[i], static_cast<unsigned>(length),
                         done[i]);
      io_uring_sqe_set_data64(sqe, i);
      ++in_flight;
    }
    int rc = io_uring_submit_and_wait(ring, 1);
    if (rc < 0 && rc != -EINTR) {
      // The ring broke: what is left is read one by one.
      io_uring_cqe* cqe = nullptr;
      while (in_flight > 0 && io_uring_wait_cqe(ring, &cqe) == 0) {
        io_uring_cqe_seen(ring, cqe);
        --in_flight;
      }
      for (size_t i = 0; i < reads.size(); ++i) {
        if (reads[i].status.ok() && done[i] < reads[i].size) ReadOneByOne(reads.subspan(i, 1));
      }
      return;
    }
    io_uring_cqe* cqe = nullptr;
    unsigned head = 0;
    unsigned seen = 0;
    io_uring_for_each_cqe(ring, head, cqe) {
      ++seen;
      --in_flight;
      const size_t i = io_uring_cqe_get_data64(cqe);
      WholeFileRead& read = reads[i];
      if (cqe->res == -EINTR || cqe->res == -EAGAIN) {
        waiting.push_back(i);
      } else if (cqe->res < 0) {
        read.status = ErrnoStatus(-cqe->res, "reading a whole file");
      } else if (cqe->res == 0) {
        read.status = absl::DataLossError(
            absl::StrCat("a whole file ended at ", done[i], " of ", read.size, " bytes"));
      } else {
        done[i] += static_cast<uint64_t>(cqe->res);
        if (done[i] < read.size) waiting.push_back(i);
      }
    }
    io_uring_cq_advance(ring, seen);
  }
}

}  // namespace granary
