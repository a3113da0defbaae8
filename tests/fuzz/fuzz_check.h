// GRANARY_FUZZ_CHECK states a property that every input of a fuzz target must
// keep, beyond "does not crash": a failure prints the property and the detail
// and aborts, which libFuzzer reports as a crash (saving the input) and which
// fails the corpus replay test of the normal build.
//
// Thread-safety: usable from any thread.
#ifndef GRANARY_TESTS_FUZZ_FUZZ_CHECK_H_
#define GRANARY_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#define GRANARY_FUZZ_CHECK(condition, detail)                                            \
  do {                                                                                   \
    if (!(condition)) {                                                                  \
      std::fprintf(stderr, "%s:%d: fuzz property failed: %s (%s)\n", __FILE__, __LINE__, \
                   #condition, std::string(detail).c_str());                             \
      std::abort();                                                                      \
    }                                                                                    \
  } while (false)

#endif  // GRANARY_TESTS_FUZZ_FUZZ_CHECK_H_
