#include "cli/interrupt_watcher.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "common/base/status.h"

namespace granary::cli {
namespace {

constexpr char kInterrupt = 'i';
constexpr char kStop = 's';

// The handler's only state: where to write. Set before the handler is installed
// and cleared after it is removed.
std::atomic<int> g_pipe_write{-1};

void OnSignal(int) {
  int saved_errno = errno;
  int fd = g_pipe_write.load();
  if (fd >= 0) {
    // A full pipe already holds a pending interrupt; losing this byte is fine.
    [[maybe_unused]] ssize_t written = write(fd, &kInterrupt, 1);
  }
  errno = saved_errno;
}

}  // namespace

absl::StatusOr<std::unique_ptr<InterruptWatcher>> InterruptWatcher::Start(
    std::function<void()> on_interrupt) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus(errno, "creating the interrupt pipe");
  g_pipe_write.store(fds[1]);
  return std::unique_ptr<InterruptWatcher>(new InterruptWatcher(std::move(on_interrupt), fds[0]));
}

InterruptWatcher::InterruptWatcher(std::function<void()> on_interrupt, int pipe_read)
    : on_interrupt_(std::move(on_interrupt)), pipe_read_(pipe_read) {
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, &previous_int_);
  sigaction(SIGTERM, &action, &previous_term_);
  thread_ = std::thread([this] { Watch(); });
}

InterruptWatcher::~InterruptWatcher() {
  RestoreHandlers();
  int fd = g_pipe_write.exchange(-1);
  [[maybe_unused]] ssize_t written = write(fd, &kStop, 1);
  thread_.join();
  close(fd);
  close(pipe_read_);
}

void InterruptWatcher::RestoreHandlers() {
  sigaction(SIGINT, &previous_int_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
}

void InterruptWatcher::Watch() {
  for (;;) {
    char byte = 0;
    ssize_t n = read(pipe_read_, &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || byte == kStop) return;
    if (!interrupted_.exchange(true, std::memory_order_acq_rel)) {
      RestoreHandlers();
      on_interrupt_();
    }
  }
}

}  // namespace granary::cli
