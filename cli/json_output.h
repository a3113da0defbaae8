// The CLI's --json documents: one JSON object per command on standard output,
// for scripts. Field names follow proto/granary.proto in snake_case; sizes are
// integers in bytes, dataset versions 16-digit hex strings as everywhere else
// the CLI prints them, fractions in [0, 1], and a ratio that is not defined yet
// (no reads) is null.
//
// Thread-safety: pure functions.
#ifndef GRANARY_CLI_JSON_OUTPUT_H_
#define GRANARY_CLI_JSON_OUTPUT_H_

#include <string_view>

#include "nlohmann/json.hpp"
#include "proto/granary.pb.h"

namespace granary::cli {

nlohmann::json DatasetJson(const v1::DatasetInfo& dataset);
nlohmann::json DatasetListJson(const v1::ListDatasetsResponse& response);
nlohmann::json RemovedDatasetJson(std::string_view name, const v1::RemoveDatasetResponse& response);
nlohmann::json StatusJson(const v1::StatusResponse& status);
nlohmann::json LocateJson(const v1::LocateResponse& locate);
// The last progress message of a prewarm of `name` that took `seconds`.
nlohmann::json PrewarmJson(std::string_view name, const v1::PrewarmProgress& progress,
                           double seconds);

// Writes `document` and a newline to standard output.
void PrintJson(const nlohmann::json& document);

}  // namespace granary::cli

#endif  // GRANARY_CLI_JSON_OUTPUT_H_
