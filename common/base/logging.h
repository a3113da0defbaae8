// Line-oriented logging to standard error:
//   2026-11-30T04:10:00.123Z I granaryd.cc:42] listening on 127.0.0.1:7070
// GRANARY_LOG(INFO|WARNING|ERROR) << ...; each statement writes one whole line
// with a single write(2), so lines from concurrent threads never interleave.
// GRANARY_LOG_FIRST_N(WARNING, 1) logs only the first N times it is reached.
// The threshold comes from $GRANARY_LOG_LEVEL (debug, info, warning, error).
//
// Thread-safety: safe from any thread.
#ifndef GRANARY_COMMON_BASE_LOGGING_H_
#define GRANARY_COMMON_BASE_LOGGING_H_

#include <atomic>
#include <sstream>

namespace granary {

enum class LogSeverity { kDEBUG = 0, kINFO = 1, kWARNING = 2, kERROR = 3 };

bool LogEnabled(LogSeverity severity);

class LogMessage {
 public:
  LogMessage(LogSeverity severity, const char* file, int line);
  ~LogMessage();
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;

  std::ostream& stream() { return stream_; }

 private:
  LogSeverity severity_;
  std::ostringstream stream_;
};

// Turns the stream expression into void for the ternary in GRANARY_LOG; '&'
// binds more loosely than '<<', so the whole message is streamed first.
struct LogVoidify {
  void operator&(std::ostream&) {}
};

}  // namespace granary

// The ternary (rather than an if) keeps the macro a single expression, safe
// inside an unbraced if/else.
#define GRANARY_LOG(severity)                                                              \
  !::granary::LogEnabled(::granary::LogSeverity::k##severity)                              \
      ? (void)0                                                                            \
      : ::granary::LogVoidify() &                                                          \
            ::granary::LogMessage(::granary::LogSeverity::k##severity, __FILE__, __LINE__) \
                .stream()

#define GRANARY_LOG_FIRST_N(severity, n)                                   \
  if (static std::atomic<int> granary_log_count_{0};                       \
      granary_log_count_.fetch_add(1, std::memory_order_relaxed) >= (n)) { \
  } else                                                                   \
    GRANARY_LOG(severity)

#endif  // GRANARY_COMMON_BASE_LOGGING_H_
