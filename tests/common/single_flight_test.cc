#include "common/base/single_flight.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace granary {
namespace {

TEST(SingleFlightTest, ConcurrentCallersShareOneCall) {
  constexpr int kCallers = 16;
  SingleFlight<int, int> flights;
  std::atomic<int> calls = 0;
  std::vector<int> results(kCallers);
  std::vector<char> led(kCallers);
  std::vector<std::thread> threads;
  for (int i = 0; i < kCallers; ++i) {
    threads.emplace_back([&, i] {
      bool leader = false;
      results[i] = flights.Do(
          7,
          [&] {
            // Hold the flight open until every other caller waits for it.
            while (flights.Waiters(7) < kCallers - 1) std::this_thread::yield();
            return ++calls * 100;
          },
          &leader);
      led[i] = leader;
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(std::count(led.begin(), led.end(), true), 1);
  for (int result : results) EXPECT_EQ(result, 100);
}

TEST(SingleFlightTest, NothingIsKeptOnceACallEnds) {
  SingleFlight<int, int> flights;
  int calls = 0;
  bool led = false;
  EXPECT_EQ(flights.Do(
                7, [&] { return ++calls; }, &led),
            1);
  EXPECT_TRUE(led);
  EXPECT_FALSE(flights.InFlight(7));
  EXPECT_EQ(flights.Waiters(7), 0);
  EXPECT_EQ(flights.Do(
                7, [&] { return ++calls; }, &led),
            2);
  EXPECT_TRUE(led);
}

TEST(SingleFlightTest, InFlightWhileTheCallRuns) {
  SingleFlight<int, int> flights;
  EXPECT_EQ(flights.Do(7,
                       [&] {
                         EXPECT_TRUE(flights.InFlight(7));
                         EXPECT_FALSE(flights.InFlight(8));
                         return 1;
                       }),
            1);
}

TEST(SingleFlightTest, OtherKeysDoNotWait) {
  SingleFlight<int, int> flights;
  std::atomic<bool> release = false;
  std::thread holder([&] {
    flights.Do(1, [&] {
      while (!release) std::this_thread::yield();
      return 1;
    });
  });
  while (!flights.InFlight(1)) std::this_thread::yield();
  bool led = false;
  EXPECT_EQ(flights.Do(
                2, [] { return 2; }, &led),
            2);
  EXPECT_TRUE(led);
  EXPECT_TRUE(flights.InFlight(1));
  release = true;
  holder.join();
}

TEST(SingleFlightTest, WaitersShareAnErrorAndTheNextCallRunsAgain) {
  SingleFlight<int, absl::StatusOr<int>> flights;
  std::atomic<int> calls = 0;
  absl::StatusOr<int> led, waited;
  std::thread leader([&] {
    led = flights.Do(7, [&]() -> absl::StatusOr<int> {
      ++calls;
      while (flights.Waiters(7) < 1) std::this_thread::yield();
      return absl::UnavailableError("source down");
    });
  });
  while (!flights.InFlight(7)) std::this_thread::yield();
  waited = flights.Do(7, [&]() -> absl::StatusOr<int> { return ++calls; });
  leader.join();
  EXPECT_EQ(led.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(waited.status(), led.status());
  EXPECT_EQ(flights.Do(7, [&]() -> absl::StatusOr<int> { return ++calls; }).value_or(0), 2);
}

}  // namespace
}  // namespace granary
