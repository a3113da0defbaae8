#include "common/stop_signals.h"

#include <pthread.h>
#include <unistd.h>

#include <thread>

#include "common/logging.h"

namespace granary {

StopSignals::StopSignals() {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGTERM);
  sigaddset(&signals_, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
  // Blocked in sigwait for the life of the process; exit ends it.
  std::thread([this] { Receive(); }).detach();
}

void StopSignals::Receive() {
  int received = 0;
  sigwait(&signals_, &received);
  MutexLock lock(&mutex_);
  if (!waiting_) {
    GRANARY_LOG(INFO) << "received " << (received == SIGTERM ? "SIGTERM" : "SIGINT")
                      << " while starting; exiting";
    ::_exit(128 + received);
  }
  signal_ = received;
  received_.SignalAll();
}

int StopSignals::Wait() {
  MutexLock lock(&mutex_);
  waiting_ = true;
  while (signal_ == 0) received_.Wait(&mutex_);
  return signal_;
}

}  // namespace granary
