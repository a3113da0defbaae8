// Fuzzes granaryd's config parser, ApplyConfigYaml, with arbitrary YAML text
// over the embedded defaults.
//
// Properties: a rejected file is INVALID_ARGUMENT and its message names the
// file; an accepted one leaves addresses that are HOST:PORT and a prewarm
// parallelism of 1-256.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/strings/match.h"
#include "cache_server/config/config.h"
#include "common/base/absl_compat.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace granary;
  constexpr std::string_view kOrigin = "/etc/granary/granaryd.yaml";
  std::string_view yaml(reinterpret_cast<const char*>(data), size);
  GranarydConfig config = DefaultGranarydConfig();
  absl::Status applied = ApplyConfigYaml(yaml, kOrigin, &config);
  if (!applied.ok()) {
    GRANARY_FUZZ_CHECK(absl::IsInvalidArgument(applied), applied.ToString());
    GRANARY_FUZZ_CHECK(absl::StartsWith(applied.message(), AsAbsl(kOrigin)), applied.ToString());
    return 0;
  }
  GRANARY_FUZZ_CHECK(config.listen.empty() || ValidateHostPort("listen", config.listen).ok(),
                     config.listen);
  GRANARY_FUZZ_CHECK(ValidateHostPort("metrics_listen", config.metrics_listen).ok(),
                     config.metrics_listen);
  GRANARY_FUZZ_CHECK(config.prewarm_parallelism >= 1 && config.prewarm_parallelism <= 256,
                     std::to_string(config.prewarm_parallelism));
  GRANARY_FUZZ_CHECK(config.fill_parallelism >= 1 && config.fill_parallelism <= 256,
                     std::to_string(config.fill_parallelism));
  return 0;
}
