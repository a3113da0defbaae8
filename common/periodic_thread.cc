#include "common/periodic_thread.h"

namespace granary {

PeriodicThread::PeriodicThread(std::chrono::milliseconds first_after,
                               std::chrono::milliseconds period, std::function<void()> tick)
    : period_(period), tick_(std::move(tick)), thread_([this, first_after] { Run(first_after); }) {}

PeriodicThread::~PeriodicThread() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void PeriodicThread::Run(std::chrono::milliseconds first_after) {
  std::unique_lock lock(mutex_);
  for (std::chrono::milliseconds wait = first_after;
       !wake_.wait_for(lock, wait, [this] { return stopping_; }); wait = period_) {
    lock.unlock();
    tick_();
    lock.lock();
  }
}

}  // namespace granary
