// The CLI's --json documents: one JSON object per command on standard output,
// for scripts. Field names follow proto/granary.proto in snake_case; sizes are
// integers in bytes, dataset versions 16-digit hex strings as everywhere else
// the CLI prints them, fractions in [0, 1], and a ratio that is not defined yet
// (no reads) is null.
//
// Paths and sources are bytes, and JSON strings are Unicode: a byte of a name
// that is not UTF-8 is written as the lone surrogate U+DC80 + (byte - 0x80),
// "\udce9" for 0xe9, which is how Python's surrogateescape reads and writes
// such names (json.loads, then os.fsencode or open() give the bytes back).
// Other characters beyond ASCII are written as \u escapes.
//
// Thread-safety: pure functions.
#ifndef GRANARY_CLI_JSON_OUTPUT_H_
#define GRANARY_CLI_JSON_OUTPUT_H_

#include <string>
#include <string_view>

#include "nlohmann/json.hpp"
#include "proto/granary.pb.h"
#include "proto/jobs.pb.h"

namespace granary::cli {

nlohmann::json DatasetJson(const v1::DatasetInfo& dataset);
nlohmann::json DatasetListJson(const v1::ListDatasetsResponse& response);
nlohmann::json RemovedDatasetJson(std::string_view name, const v1::RemoveDatasetResponse& response);
nlohmann::json StatusJson(const v1::StatusResponse& status);
nlohmann::json LocateJson(const v1::LocateResponse& locate);
// Per job: bytes, reads and read waits by origin ("memory", "passthrough",
// "local", "peer", "source"), waits in seconds.
nlohmann::json JobsJson(const v1::ListJobsResponse& jobs);
// The last progress message of a prewarm of `name` that took `seconds`.
nlohmann::json PrewarmJson(std::string_view name, const v1::PrewarmProgress& progress,
                           double seconds);

// A path or source for a document: see above.
nlohmann::json JsonName(std::string_view bytes);

// `document` as text, names' stray bytes as surrogates.
std::string FormatJson(const nlohmann::json& document);
// Writes FormatJson(document) and a newline to standard output.
void PrintJson(const nlohmann::json& document);

}  // namespace granary::cli

#endif  // GRANARY_CLI_JSON_OUTPUT_H_
