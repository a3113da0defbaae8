// SuiteSetup runs the setup a test suite's tests share once per process, from
// the first test's SetUp(), in place of SetUpTestSuite(): GoogleTest marks
// every test of a suite whose SetUpTestSuite() failed as skipped, and ctest
// counts a skipped test as no failure, so a setup that failed (a server that
// did not start) would go unnoticed. Here it fails the test that ran it, with
// its own messages, and every later test of the process.
//
// Thread-safety: for the test thread only, as SetUp() is.
#ifndef GRANARY_TESTS_SUPPORT_SUITE_SETUP_H_
#define GRANARY_TESTS_SUPPORT_SUITE_SETUP_H_

#include <gtest/gtest.h>

namespace granary::testing {

class SuiteSetup {
 public:
  // Runs `setup` (whose assertions fail the calling test) the first time;
  // fails the calling test fatally whenever `setup` had a fatal failure.
  // Call as ASSERT_NO_FATAL_FAILURE(setup.RunOnce(...)) from SetUp().
  template <typename Setup>
  void RunOnce(Setup setup) {
    if (!ran_) {
      ran_ = true;
      setup();
      succeeded_ = !::testing::Test::HasFatalFailure();
      return;
    }
    ASSERT_TRUE(succeeded_) << "the suite's setup failed in an earlier test of this process";
  }

 private:
  bool ran_ = false;
  bool succeeded_ = false;
};

}  // namespace granary::testing

#endif  // GRANARY_TESTS_SUPPORT_SUITE_SETUP_H_
