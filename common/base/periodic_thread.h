// PeriodicThread calls a function from a thread of its own: first
// `first_after` after it is made, then every `period` after each call ends,
// until it is destroyed. The background work of granaryd and granary-fuse
// (releasing versions, say) is written as one such function.
//
// Thread-safety: `tick` runs on the thread alone, never concurrently with
// itself; the destructor waits for a running call to end and stops the
// thread.
#ifndef GRANARY_COMMON_BASE_PERIODIC_THREAD_H_
#define GRANARY_COMMON_BASE_PERIODIC_THREAD_H_

#include <chrono>
#include <functional>
#include <thread>

#include "common/base/mutex.h"

namespace granary {

class PeriodicThread {
 public:
  PeriodicThread(std::chrono::milliseconds first_after, std::chrono::milliseconds period,
                 std::function<void()> tick);
  ~PeriodicThread();
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;

 private:
  void Run(std::chrono::milliseconds first_after);

  const std::chrono::milliseconds period_;
  const std::function<void()> tick_;
  Mutex mutex_;
  CondVar wake_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread thread_;  // Last: starts once the rest exists.
};

}  // namespace granary

#endif  // GRANARY_COMMON_BASE_PERIODIC_THREAD_H_
