#include "common/base/stop_signals.h"

#include <pthread.h>
#include <unistd.h>

#include "common/base/logging.h"

namespace granary {

StopSignals::StopSignals() {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGTERM);
  sigaddset(&signals_, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
  receiver_ = std::thread([this] { Receive(); });
}

StopSignals::~StopSignals() {
  bool still_waiting;
  {
    MutexLock lock(&mutex_);
    still_waiting = signal_ == 0;
    closing_ = true;
  }
  // The receiver sits in sigwait until a signal comes; one sent to that thread
  // alone wakes it, and closing_ tells it the signal is ours.
  if (still_waiting) pthread_kill(receiver_.native_handle(), SIGTERM);
  receiver_.join();
}

void StopSignals::Receive() {
  int received = 0;
  sigwait(&signals_, &received);
  MutexLock lock(&mutex_);
  if (closing_) return;
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
