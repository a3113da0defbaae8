#include "common/net/defaults.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace granary {
namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0' ? std::string(value) : fallback;
}

}  // namespace

std::string DefaultDataDir() {
  if (::geteuid() == 0) return "/var/lib/granary";
  std::string home = EnvOr("HOME", "/tmp");
  return absl::StrCat(EnvOr("XDG_STATE_HOME", absl::StrCat(home, "/.local/state")), "/granary");
}

std::string DefaultSocketPath() {
  if (::geteuid() == 0) return kNodeSocketPath;
  std::string runtime = EnvOr("XDG_RUNTIME_DIR", absl::StrCat("/tmp/granary-", ::geteuid()));
  return absl::StrCat(runtime, "/granary/granaryd.sock");
}

std::string DefaultClientSocketPath() {
  std::string named = EnvOr("GRANARY_SOCKET", "");
  if (!named.empty()) return named;
  const auto is_socket = [](const std::string& path) {
    struct stat status {};
    return ::stat(path.c_str(), &status) == 0 && S_ISSOCK(status.st_mode);
  };
  std::string own = DefaultSocketPath();
  if (!is_socket(own) && is_socket(kNodeSocketPath)) return kNodeSocketPath;
  return own;
}

}  // namespace granary
