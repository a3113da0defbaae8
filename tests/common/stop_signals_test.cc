#include "common/base/stop_signals.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace granary {
namespace {

// The scheduler's state letter of thread `tid` of this process ('S' while it
// sleeps, as in a wait on a condition variable).
char ThreadState(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string stat(std::istreambuf_iterator<char>(in), {});
  const size_t end_of_name = stat.rfind(')');
  return end_of_name == std::string::npos || end_of_name + 2 >= stat.size() ? '?'
                                                                            : stat[end_of_name + 2];
}

int ThreadCount() {
  int count = 0;
  for ([[maybe_unused]] const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    ++count;
  }
  return count;
}

class StopSignalsTest : public ::testing::Test {
 protected:
  // StopSignals blocks the signals in the thread that makes it; the tests
  // after these should not inherit that.
  void TearDown() override {
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
  }
};

TEST_F(StopSignalsTest, WaitReturnsTheSignalAndDestructionJoinsTheReceiver) {
  const int threads_before = ThreadCount();
  const pid_t waiter = static_cast<pid_t>(::syscall(SYS_gettid));
  for (int round = 0; round < 20; ++round) {
    StopSignals stop_signals;
    // Sent only once the waiter sleeps in Wait(): a signal before Wait() ends
    // the process, as it should for a daemon still starting.
    std::thread sender([waiter, round] {
      while (ThreadState(waiter) != 'S') std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ::kill(::getpid(), round % 2 == 0 ? SIGTERM : SIGINT);
    });
    EXPECT_EQ(stop_signals.Wait(), round % 2 == 0 ? SIGTERM : SIGINT);
    sender.join();
  }
  EXPECT_EQ(ThreadCount(), threads_before);
}

TEST_F(StopSignalsTest, DestroyedUnsignalledItEndsItsReceiverAndLeavesNothingPending) {
  const int threads_before = ThreadCount();
  for (int round = 0; round < 20; ++round) {
    StopSignals stop_signals;
  }
  EXPECT_EQ(ThreadCount(), threads_before);
  sigset_t pending;
  sigpending(&pending);
  EXPECT_FALSE(sigismember(&pending, SIGTERM));
  EXPECT_FALSE(sigismember(&pending, SIGINT));
}

}  // namespace
}  // namespace granary
