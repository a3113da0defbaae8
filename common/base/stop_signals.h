// StopSignals is how a Granary daemon waits for SIGTERM or SIGINT: the
// constructor blocks both in the calling thread, and so in every thread started
// after it, and Wait() returns the first one delivered. Construct it before any
// thread starts, or a signal may land on a thread that does not expect it.
//
// Until Wait() is called the daemon is still starting (recovering its store,
// reaching its peers) and has nothing to drain: a stop signal then ends the
// process at once, with a log line and exit status 128 + the signal, rather
// than going unheard until startup ends.
//
// Thread-safety: construct, Wait() and destroy from the main thread; a thread
// of its own receives the signals, and the destructor ends and joins it.
#ifndef GRANARY_COMMON_BASE_STOP_SIGNALS_H_
#define GRANARY_COMMON_BASE_STOP_SIGNALS_H_

#include <signal.h>

#include <thread>

#include "common/base/mutex.h"

namespace granary {

class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Blocks until SIGTERM or SIGINT arrives; returns its number.
  int Wait();

 private:
  void Receive();

  sigset_t signals_;
  Mutex mutex_;
  CondVar received_;
  bool waiting_ ABSL_GUARDED_BY(mutex_) = false;
  bool closing_ ABSL_GUARDED_BY(mutex_) = false;
  int signal_ ABSL_GUARDED_BY(mutex_) = 0;
  std::thread receiver_;
};

}  // namespace granary

#endif  // GRANARY_COMMON_BASE_STOP_SIGNALS_H_
