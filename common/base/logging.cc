#include "common/base/logging.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

namespace granary {
namespace {

LogSeverity ThresholdFromEnvironment() {
  const char* level = std::getenv("GRANARY_LOG_LEVEL");
  if (level == nullptr) return LogSeverity::kINFO;
  std::string value(level);
  if (value == "debug") return LogSeverity::kDEBUG;
  if (value == "warning") return LogSeverity::kWARNING;
  if (value == "error") return LogSeverity::kERROR;
  return LogSeverity::kINFO;
}

const char* Basename(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash == nullptr ? path : slash + 1;
}

}  // namespace

bool LogEnabled(LogSeverity severity) {
  static const LogSeverity threshold = ThresholdFromEnvironment();
  return severity >= threshold;
}

LogMessage::LogMessage(LogSeverity severity, const char* file, int line) : severity_(severity) {
  auto now = std::chrono::system_clock::now();
  std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  int millis = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm utc;
  gmtime_r(&seconds, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &utc);
  static constexpr char kLetters[] = {'D', 'I', 'W', 'E'};
  char millis_text[8];
  std::snprintf(millis_text, sizeof(millis_text), ".%03dZ", millis);
  stream_ << stamp << millis_text << ' ' << kLetters[static_cast<int>(severity_)] << ' '
          << Basename(file) << ':' << line << "] ";
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  std::string line = stream_.str();
  size_t written = 0;
  while (written < line.size()) {
    ssize_t n = ::write(STDERR_FILENO, line.data() + written, line.size() - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
}

}  // namespace granary
