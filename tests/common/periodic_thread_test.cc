#include "common/periodic_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace granary {
namespace {

using std::chrono::milliseconds;

TEST(PeriodicThreadTest, CallsRepeatedlyUntilDestroyed) {
  std::atomic<int> calls = 0;
  {
    PeriodicThread thread(milliseconds(0), milliseconds(1), [&] { ++calls; });
    while (calls < 3) std::this_thread::sleep_for(milliseconds(1));
  }
  const int after_destruction = calls;
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(calls, after_destruction);
}

TEST(PeriodicThreadTest, DestructionDoesNotWaitForTheFirstCall) {
  std::atomic<int> calls = 0;
  const auto start = std::chrono::steady_clock::now();
  {
    PeriodicThread thread(std::chrono::hours(1), std::chrono::hours(1), [&] { ++calls; });
  }
  EXPECT_EQ(calls, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::minutes(1));
}

TEST(PeriodicThreadTest, DestructionWaitsForARunningCall) {
  std::atomic<bool> started = false;
  std::atomic<bool> finished = false;
  {
    PeriodicThread thread(milliseconds(0), std::chrono::hours(1), [&] {
      started = true;
      std::this_thread::sleep_for(milliseconds(50));
      finished = true;
    });
    while (!started) std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_TRUE(finished);
}

}  // namespace
}  // namespace granary
