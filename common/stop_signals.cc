#include "common/stop_signals.h"

#include <pthread.h>

namespace granary {

StopSignals::StopSignals() {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGTERM);
  sigaddset(&signals_, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
}

int StopSignals::Wait() {
  int received = 0;
  sigwait(&signals_, &received);
  return received;
}

}  // namespace granary
