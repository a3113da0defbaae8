// The CLI's --json documents: one JSON object per command on standard output,
// for scripts. The documents a node's status page shows too (status, locate,
// jobs, holds) and the conventions of every document (names, sizes,
// versions, ratios, names' stray bytes) are common/reports/json_documents.h's; these
// are the CLI's own.
//
// Thread-safety: pure functions.
#ifndef GRANARY_CLI_JSON_OUTPUT_H_
#define GRANARY_CLI_JSON_OUTPUT_H_

#include <string>
#include <string_view>

#include "common/reports/json_documents.h"
#include "nlohmann/json.hpp"
#include "proto/granary.pb.h"

namespace granary::cli {

nlohmann::json DatasetJson(const v1::DatasetInfo& dataset);
nlohmann::json DatasetListJson(const v1::ListDatasetsResponse& response);
nlohmann::json RemovedDatasetJson(std::string_view name, const v1::RemoveDatasetResponse& response);
// The last progress message of a prewarm of `name` that took `seconds`.
nlohmann::json PrewarmJson(std::string_view name, const v1::PrewarmProgress& progress,
                           double seconds);

// Writes FormatJson(document) and a newline to standard output.
void PrintJson(const nlohmann::json& document);

}  // namespace granary::cli

#endif  // GRANARY_CLI_JSON_OUTPUT_H_
