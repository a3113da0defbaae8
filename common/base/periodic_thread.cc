#include "common/base/periodic_thread.h"

namespace granary {

PeriodicThread::PeriodicThread(std::chrono::milliseconds first_after,
                               std::chrono::milliseconds period, std::function<void()> tick)
    : period_(period), tick_(std::move(tick)), thread_([this, first_after] { Run(first_after); }) {}

PeriodicThread::~PeriodicThread() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
  }
  wake_.SignalAll();
  thread_.join();
}

void PeriodicThread::Run(std::chrono::milliseconds first_after) {
  MutexLock lock(&mutex_);
  for (std::chrono::milliseconds wait = first_after; !wake_.WaitFor(
           &mutex_, wait, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return stopping_; });
       wait = period_) {
    mutex_.Unlock();
    tick_();
    mutex_.Lock();
  }
}

}  // namespace granary
