// TaskThreads runs posted tasks on a fixed number of threads of its own, in
// the order they were posted. granaryd hands it work that must go on after
// the thread that started it has answered its caller.
//
// Thread-safety: Post() may be called concurrently. The destructor runs the
// tasks still queued, then joins the threads; a task must not post to the
// object being destroyed.
#ifndef GRANARY_COMMON_TASK_THREADS_H_
#define GRANARY_COMMON_TASK_THREADS_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace granary {

class TaskThreads {
 public:
  explicit TaskThreads(int threads);
  ~TaskThreads();
  TaskThreads(const TaskThreads&) = delete;
  TaskThreads& operator=(const TaskThreads&) = delete;

  void Post(std::function<void()> task);

 private:
  void Run();

  Mutex mutex_;
  CondVar wake_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<std::thread> threads_;  // Last: they start once the rest exists.
};

}  // namespace granary

#endif  // GRANARY_COMMON_TASK_THREADS_H_
