// The error for a YAML document that yaml-cpp could not parse: INVALID_ARGUMENT
// naming the origin (a file path) and the line and column.
//
// Thread-safety: a pure function.
#ifndef GRANARY_COMMON_BASE_YAML_STATUS_H_
#define GRANARY_COMMON_BASE_YAML_STATUS_H_

#include <string_view>

#include "absl/status/status.h"

namespace YAML {
class Exception;
}  // namespace YAML

namespace granary {

absl::Status YamlErrorStatus(std::string_view origin, const YAML::Exception& error);

}  // namespace granary

#endif  // GRANARY_COMMON_BASE_YAML_STATUS_H_
