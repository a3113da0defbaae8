#include "common/task_threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace granary {
namespace {

TEST(TaskThreadsTest, RunsEveryTaskPostedAndTheQueuedOnesBeforeItIsDestroyed) {
  std::atomic<int> ran = 0;
  {
    TaskThreads threads(2);
    for (int i = 0; i < 100; ++i) {
      threads.Post([&] {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        ++ran;
      });
    }
  }
  EXPECT_EQ(ran, 100);
}

TEST(TaskThreadsTest, TasksRunOnItsThreadsNotThePostersAndConcurrently) {
  std::atomic<int> inside = 0;
  std::atomic<int> most_inside = 0;
  std::atomic<bool> on_poster = false;
  const std::thread::id poster = std::this_thread::get_id();
  {
    TaskThreads threads(2);
    for (int i = 0; i < 2; ++i) {
      threads.Post([&] {
        if (std::this_thread::get_id() == poster) on_poster = true;
        int now = ++inside;
        int seen = most_inside.load();
        while (now > seen && !most_inside.compare_exchange_weak(seen, now)) {
        }
        // Both tasks are inside at once before either leaves.
        while (most_inside.load() < 2) std::this_thread::yield();
        --inside;
      });
    }
  }
  EXPECT_FALSE(on_poster);
  EXPECT_EQ(most_inside, 2);
}

}  // namespace
}  // namespace granary
