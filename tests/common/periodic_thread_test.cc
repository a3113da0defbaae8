#include "common/base/periodic_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace granary {
namespace {

using std::chrono::milliseconds;

TEST(PeriodicThreadTest, CallsRepeatedlyUntilDestroyed) {
  constexpr milliseconds kPeriod(1);
  std::atomic<int> calls = 0;
  {
    PeriodicThread thread(milliseconds(0), kPeriod, [&] { ++calls; });
    while (calls < 3) std::this_thread::yield();
  }
  const int after_destruction = calls;
  // Nothing can be polled for a call that must not come: a thread still
  // running would have called again many times over in 20 periods.
  std::this_thread::sleep_for(20 * kPeriod);
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
      // The call outlasts the destructor's start by this much: a destructor
      // that did not wait would return first.
      std::this_thread::sleep_for(milliseconds(50));
      finished = true;
    });
    while (!started) std::this_thread::yield();
  }
  EXPECT_TRUE(finished);
}

}  // namespace
}  // namespace granary
