#include "cache_server/config/config.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <functional>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/absl_compat.h"
#include "common/base/file_util.h"
#include "common/base/size.h"
#include "common/base/status.h"
#include "common/base/yaml_status.h"
#include "common/dataset/manifest.h"
#include "common/net/defaults.h"

namespace granary {
namespace {

using KeyParser = std::function<absl::Status(const YAML::Node&, GranarydConfig*)>;

// Errors from the parsers below are prefixed with the origin and key by the caller.
absl::StatusOr<std::string> Scalar(const YAML::Node& node) {
  if (!node.IsScalar()) return absl::InvalidArgumentError("expected a single value");
  return node.Scalar();
}

KeyParser StringKey(std::string GranarydConfig::*field) {
  return [field](const YAML::Node& node, GranarydConfig* config) -> absl::Status {
    GRANARY_ASSIGN_OR_RETURN(config->*field, Scalar(node));
    return absl::OkStatus();
  };
}

KeyParser WholeNumberKey(uint32_t GranarydConfig::*field, uint32_t min, uint32_t max) {
  return [=](const YAML::Node& node, GranarydConfig* config) -> absl::Status {
    GRANARY_ASSIGN_OR_RETURN(std::string text, Scalar(node));
    uint32_t value = 0;
    if (!absl::SimpleAtoi(text, &value) || value < min || value > max) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", text, "' is not a whole number from ", min, " to ", max));
    }
    config->*field = value;
    return absl::OkStatus();
  };
}

KeyParser FractionKey(double GranarydConfig::*field, double min, double max) {
  return [=](const YAML::Node& node, GranarydConfig* config) -> absl::Status {
    GRANARY_ASSIGN_OR_RETURN(std::string text, Scalar(node));
    double value = 0;
    if (!absl::SimpleAtod(text, &value) || !(value >= min && value <= max)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", text, "' is not a fraction from ", min, " to ", max));
    }
    config->*field = value;
    return absl::OkStatus();
  };
}

KeyParser AddressKey(std::string GranarydConfig::*field) {
  return [field](const YAML::Node& node, GranarydConfig* config) -> absl::Status {
    GRANARY_ASSIGN_OR_RETURN(std::string value, Scalar(node));
    GRANARY_RETURN_IF_ERROR(ValidateHostPort("address", value));
    config->*field = value;
    return absl::OkStatus();
  };
}

// One value (a directory, an endpoint) or a list of them; never empty.
KeyParser StringListKey(std::vector<std::string> GranarydConfig::*field) {
  return [field](const YAML::Node& node, GranarydConfig* config) -> absl::Status {
    std::vector<std::string> values;
    if (node.IsScalar()) {
      values.push_back(node.Scalar());
    } else if (node.IsSequence()) {
      for (const YAML::Node& item : node) {
        GRANARY_ASSIGN_OR_RETURN(std::string value, Scalar(item));
        values.push_back(value);
      }
    } else {
      return absl::InvalidArgumentError("expected one value or a list of values");
    }
    if (values.empty()) return absl::InvalidArgumentError("the list is empty");
    config->*field = std::move(values);
    return absl::OkStatus();
  };
}

const std::map<std::string, KeyParser>& KeyParsers() {
  static const auto* parsers = new std::map<std::string, KeyParser>{
      {"data_dir", StringKey(&GranarydConfig::data_dir)},
      {"socket", StringKey(&GranarydConfig::socket_path)},
      {"node_id", StringKey(&GranarydConfig::node_id)},
      {"group", StringKey(&GranarydConfig::group)},
      {"members", StringKey(&GranarydConfig::members_file)},
      {"etcd", StringKey(&GranarydConfig::etcd_url)},
      {"listen", AddressKey(&GranarydConfig::listen)},
      {"metrics_listen", AddressKey(&GranarydConfig::metrics_listen)},
      {"capacity",
       [](const YAML::Node& node, GranarydConfig* config) -> absl::Status {
         GRANARY_ASSIGN_OR_RETURN(std::string text, Scalar(node));
         GRANARY_ASSIGN_OR_RETURN(config->capacity_bytes, ParseCapacity(text));
         return absl::OkStatus();
       }},
      {"prewarm_parallelism", WholeNumberKey(&GranarydConfig::prewarm_parallelism, 1, 256)},
      {"fill_parallelism", WholeNumberKey(&GranarydConfig::fill_parallelism, 1, 256)},
      {"fill",
       [](const YAML::Node& node, GranarydConfig* config) -> absl::Status {
         GRANARY_ASSIGN_OR_RETURN(std::string text, Scalar(node));
         if (text != "on-read" && text != "none") {
           return absl::InvalidArgumentError(
               absl::StrCat("'", AsAbsl(text), "' is not a fill policy: on-read or none"));
         }
         config->fill_on_read = text == "on-read";
         return absl::OkStatus();
       }},
      {"write_behind",
       [](const YAML::Node& node, GranarydConfig* config) -> absl::Status {
         GRANARY_ASSIGN_OR_RETURN(std::string text, Scalar(node));
         GRANARY_ASSIGN_OR_RETURN(config->write_behind_bytes, ParseSize(text));
         return absl::OkStatus();
       }},
      {"max_connections", WholeNumberKey(&GranarydConfig::max_connections, 16, 1 << 20)},
      {"max_connections_per_user",
       WholeNumberKey(&GranarydConfig::max_connections_per_user, 1, 1 << 20)},
      {"max_connections_per_host",
       WholeNumberKey(&GranarydConfig::max_connections_per_host, 1, 1 << 20)},
      {"max_unauthenticated_connections",
       WholeNumberKey(&GranarydConfig::max_unauthenticated_connections, 1, 4096)},
      {"max_unauthenticated_connections_per_host",
       WholeNumberKey(&GranarydConfig::max_unauthenticated_connections_per_host, 1, 4096)},
      {"max_streams_per_connection",
       WholeNumberKey(&GranarydConfig::max_streams_per_connection, 1, 1 << 16)},
      {"max_threads", WholeNumberKey(&GranarydConfig::max_threads, 8, 1 << 16)},
      {"stream_stall_seconds", WholeNumberKey(&GranarydConfig::stream_stall_seconds, 1, 86400)},
      {"version_grace_seconds",
       WholeNumberKey(&GranarydConfig::version_grace_seconds, 0, 30 * 86400)},
      {"source_refresh_interval_seconds",
       WholeNumberKey(&GranarydConfig::source_refresh_interval_seconds, 1, 86400)},
      {"locality_period_ms", WholeNumberKey(&GranarydConfig::locality_period_ms, 50, 600'000)},
      {"locality_max_age_seconds",
       WholeNumberKey(&GranarydConfig::locality_max_age_seconds, 1, 86400)},
      {"etcd_lease_ttl", WholeNumberKey(&GranarydConfig::etcd_lease_ttl_seconds, 2, 3600)},
      {"advertise", AddressKey(&GranarydConfig::advertise)},
      {"cluster_token_file", StringKey(&GranarydConfig::cluster_token_file)},
      {"socket_group", StringKey(&GranarydConfig::socket_group)},
      {"insecure_tcp",
       [](const YAML::Node& node, GranarydConfig* config) -> absl::Status {
         GRANARY_ASSIGN_OR_RETURN(std::string text, Scalar(node));
         if (text != "true" && text != "false") {
           return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not true or false"));
         }
         config->insecure_tcp = text == "true";
         return absl::OkStatus();
       }},
      {"socket_mode",
       [](const YAML::Node& node, GranarydConfig* config) -> absl::Status {
         GRANARY_ASSIGN_OR_RETURN(std::string text, Scalar(node));
         uint32_t mode = 0;
         auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), mode, 8);
         if (text.empty() || error != std::errc() || end != text.data() + text.size() ||
             mode > 0777) {
           return absl::InvalidArgumentError(
               absl::StrCat("'", text, "' is not permission bits in octal, such as 0660"));
         }
         config->socket_mode = mode;
         return absl::OkStatus();
       }},
      {"cache_dirs", StringListKey(&GranarydConfig::cache_dirs)},
      {"source_roots", StringListKey(&GranarydConfig::source_roots)},
      {"s3_endpoints", StringListKey(&GranarydConfig::s3_endpoints)},
      {"s3_endpoint_profiles",
       [](const YAML::Node& node, GranarydConfig* config) -> absl::Status {
         if (!node.IsMap()) {
           return absl::InvalidArgumentError(
               "expected a mapping of endpoints to profile names, such as "
               "{http://10.0.0.5:9000: minio}");
         }
         for (const auto& item : node) {
           GRANARY_ASSIGN_OR_RETURN(std::string endpoint, Scalar(item.first));
           GRANARY_ASSIGN_OR_RETURN(std::string profile, Scalar(item.second));
           if (profile.empty()) {
             return absl::InvalidArgumentError(
                 absl::StrCat("endpoint '", endpoint, "' has an empty profile name"));
           }
           config->s3_endpoint_profiles[endpoint] = profile;
         }
         return absl::OkStatus();
       }},
      {"s3_connect_timeout_ms",
       WholeNumberKey(&GranarydConfig::s3_connect_timeout_ms, 10, 600'000)},
      {"s3_request_timeout_ms",
       WholeNumberKey(&GranarydConfig::s3_request_timeout_ms, 10, 3'600'000)},
      {"admin_group", StringKey(&GranarydConfig::admin_group)},
      {"max_datasets", WholeNumberKey(&GranarydConfig::max_datasets, 1, 1'000'000)},
      {"max_dataset_entries",
       WholeNumberKey(&GranarydConfig::max_dataset_entries, 1, kMaxManifestEntries)},
      {"max_prewarm_paths", WholeNumberKey(&GranarydConfig::max_prewarm_paths, 1, 10'000'000)},
      {"max_prewarms", WholeNumberKey(&GranarydConfig::max_prewarms, 1, 1 << 16)},
      {"max_prewarms_per_user", WholeNumberKey(&GranarydConfig::max_prewarms_per_user, 1, 1 << 16)},
      {"prewarm_user_share", FractionKey(&GranarydConfig::prewarm_user_share, 0.01, 1)},
      {"manifest_memory_mib", WholeNumberKey(&GranarydConfig::manifest_memory_mib, 1, 1 << 20)},
      {"scontrol", StringKey(&GranarydConfig::scontrol)},
      {"stage_in_poll_ms", WholeNumberKey(&GranarydConfig::stage_in_poll_ms, 100, 600'000)},
      {"hold_share", FractionKey(&GranarydConfig::hold_share, 0, 1)},
      {"active_after_seconds", WholeNumberKey(&GranarydConfig::active_after_seconds, 1, 86400)},
      {"max_job_series", WholeNumberKey(&GranarydConfig::max_job_series, 1, 100'000)},
      {"job_idle_seconds", WholeNumberKey(&GranarydConfig::job_idle_seconds, 1, 30 * 86400)},
      {"receipt_dir", StringKey(&GranarydConfig::receipt_dir)},
      {"source_journal", StringKey(&GranarydConfig::source_journal)},
  };
  return *parsers;
}

absl::Status ApplyRoot(const YAML::Node& root, std::string_view origin, GranarydConfig* config) {
  if (root.IsNull()) return absl::OkStatus();
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(AsAbsl(origin), ": expected a mapping of keys to values"));
  }
  const auto& parsers = KeyParsers();
  for (const auto& item : root) {
    std::string key = item.first.as<std::string>();
    auto parser = parsers.find(key);
    if (parser == parsers.end()) {
      std::vector<std::string> known;
      for (const auto& [name, unused] : parsers) known.push_back(name);
      return absl::InvalidArgumentError(absl::StrCat(AsAbsl(origin), ": unknown key '", key,
                                                     "' (known keys: ", absl::StrJoin(known, ", "),
                                                     ")"));
    }
    absl::Status applied = parser->second(item.second, config);
    if (!applied.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(AsAbsl(origin), ": key '", key, "': ", applied.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

GranarydConfig DefaultGranarydConfig() {
  GranarydConfig config;
  config.data_dir = DefaultDataDir();
  config.socket_path = DefaultSocketPath();
  config.metrics_listen = kDefaultMetricsAddress;
  return config;
}

absl::StatusOr<uint64_t> ParseCapacity(std::string_view text) {
  GRANARY_ASSIGN_OR_RETURN(uint64_t bytes, ParseSize(text));
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        "a capacity of 0 leaves no room to cache anything; give a size such as 200GiB, or leave "
        "it out for 80% of the cache disks' free space");
  }
  return bytes;
}

std::string TcpListenAddress(const GranarydConfig& config) {
  if (!config.listen.empty()) return config.listen;
  if (!config.members_file.empty() || !config.etcd_url.empty()) return kDefaultListenAddress;
  return std::string();
}

absl::Status CheckTcpPolicy(const GranarydConfig& config) {
  if (TcpListenAddress(config).empty() || !config.cluster_token_file.empty() ||
      config.insecure_tcp) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      absl::StrCat("a TCP listener (", TcpListenAddress(config),
                   ") needs a cluster token, or anyone who reaches the port may call granaryd: "
                   "give --token-file FILE (config cluster_token_file), or --insecure-tcp "
                   "(config insecure_tcp: true) to run it unauthenticated"));
}

absl::Status ValidateHostPort(std::string_view what, std::string_view value) {
  size_t colon = value.rfind(':');
  uint32_t port = 0;
  if (colon == std::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(AsAbsl(value.substr(colon + 1)), &port) || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(AsAbsl(what), " '", AsAbsl(value), "' is not HOST:PORT"));
  }
  return absl::OkStatus();
}

absl::Status ApplyConfigYaml(std::string_view yaml, std::string_view origin,
                             GranarydConfig* config) {
  // yaml-cpp reports malformed documents by throwing; nothing escapes this
  // function.
  try {
    return ApplyRoot(YAML::Load(std::string(yaml)), origin, config);
  } catch (const YAML::Exception& error) {
    return YamlErrorStatus(origin, error);
  }
}

absl::Status YamlErrorStatus(std::string_view origin, const YAML::Exception& error) {
  return absl::InvalidArgumentError(absl::StrCat(AsAbsl(origin), ": line ", error.mark.line + 1,
                                                 ", column ", error.mark.column + 1, ": ",
                                                 error.msg));
}

absl::Status ApplyConfigFile(const std::string& path, GranarydConfig* config) {
  auto text = ReadFileToString(path, "config file");
  if (!text.ok()) return text.status();
  return ApplyConfigYaml(*text, path, config);
}

}  // namespace granary
