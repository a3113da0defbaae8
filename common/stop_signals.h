// StopSignals is how a Granary daemon waits for SIGTERM or SIGINT: the
// constructor blocks both in the calling thread, and so in every thread started
// after it, and Wait() returns the first one delivered. Construct it before any
// thread starts, or a signal may land on a thread that does not expect it.
//
// Thread-safety: construct and Wait() from the main thread.
#ifndef GRANARY_COMMON_STOP_SIGNALS_H_
#define GRANARY_COMMON_STOP_SIGNALS_H_

#include <signal.h>

namespace granary {

class StopSignals {
 public:
  StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Blocks until SIGTERM or SIGINT arrives; returns its number.
  int Wait();

 private:
  sigset_t signals_;
};

}  // namespace granary

#endif  // GRANARY_COMMON_STOP_SIGNALS_H_
