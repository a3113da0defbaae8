#include "common/task_threads.h"

#include <utility>

namespace granary {

TaskThreads::TaskThreads(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

TaskThreads::~TaskThreads() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
  }
  wake_.SignalAll();
  for (std::thread& thread : threads_) thread.join();
}

void TaskThreads::Post(std::function<void()> task) {
  {
    MutexLock lock(&mutex_);
    queue_.push_back(std::move(task));
  }
  wake_.Signal();
}

void TaskThreads::Run() {
  for (;;) {
    std::function<void()> task;
    {
      MutexLock lock(&mutex_);
      while (queue_.empty() && !stopping_) wake_.Wait(&mutex_);
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace granary
