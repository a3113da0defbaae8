// Turns Ctrl-C (SIGINT) and SIGTERM into a callback on an ordinary thread while
// a long call runs, so the call can be cancelled cleanly (the server stops its
// work, the CLI prints what was done) instead of the process dying mid-stream.
// A signal handler may only do async-signal-safe things, so the handler just
// writes a byte to a pipe and a watcher thread runs the callback. After the
// first signal the default action is restored: a second Ctrl-C kills at once.
//
// Thread-safety: at most one InterruptWatcher may exist at a time. The callback
// runs on the watcher thread, at most once.
#ifndef GRANARY_CLI_INTERRUPT_WATCHER_H_
#define GRANARY_CLI_INTERRUPT_WATCHER_H_

#include <signal.h>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

#include "absl/status/statusor.h"

namespace granary::cli {

class InterruptWatcher {
 public:
  // Installs the handlers. Fails only when the process is out of descriptors.
  static absl::StatusOr<std::unique_ptr<InterruptWatcher>> Start(
      std::function<void()> on_interrupt);
  // Restores the previous signal dispositions.
  ~InterruptWatcher();
  InterruptWatcher(const InterruptWatcher&) = delete;
  InterruptWatcher& operator=(const InterruptWatcher&) = delete;

  bool interrupted() const { return interrupted_.load(std::memory_order_acquire); }

 private:
  InterruptWatcher(std::function<void()> on_interrupt, int pipe_read);
  void Watch();
  void RestoreHandlers();

  std::function<void()> on_interrupt_;
  std::atomic<bool> interrupted_{false};
  int pipe_read_ = -1;
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
  std::thread thread_;
};

}  // namespace granary::cli

#endif  // GRANARY_CLI_INTERRUPT_WATCHER_H_
