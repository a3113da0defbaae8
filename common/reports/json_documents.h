// The JSON documents of what a node reports about the cache, built once for
// every place that shows them: the CLI's --json output (`granary status`,
// `locate`, `jobs`, `holds`) and granaryd's status page (/status.json). Field
// names follow the protos in snake_case; sizes are integers in bytes, dataset
// versions 16-digit hex strings as everywhere else Granary prints them,
// fractions in [0, 1], and a ratio that is not defined yet (no reads) is null.
//
// Paths and sources are bytes, and JSON strings are Unicode: a byte of a name
// that is not UTF-8 is written as the lone surrogate U+DC80 + (byte - 0x80),
// "\udce9" for 0xe9, which is how Python's surrogateescape reads and writes
// such names (json.loads, then os.fsencode or open() give the bytes back).
// Other characters beyond ASCII are written as \u escapes.
//
// Thread-safety: pure functions.
#ifndef GRANARY_COMMON_REPORTS_JSON_DOCUMENTS_H_
#define GRANARY_COMMON_REPORTS_JSON_DOCUMENTS_H_

#include <string>
#include <string_view>

#include "nlohmann/json.hpp"
#include "proto/granary.pb.h"
#include "proto/jobs.pb.h"
#include "proto/staging.pb.h"

namespace granary {

nlohmann::json StatusJson(const v1::StatusResponse& status);
nlohmann::json LocateJson(const v1::LocateResponse& locate);
// Per job: bytes, reads and read waits by origin ("memory", "passthrough",
// "local", "peer", "source"), waits in seconds.
nlohmann::json JobsJson(const v1::ListJobsResponse& jobs);
nlohmann::json HoldsJson(const v1::ListHoldsResponse& holds);
// A fill's or prewarm's progress: done, total, percent and rate.
nlohmann::json FillJson(const v1::FillProgress& fill);

// A path or source for a document: see above.
nlohmann::json JsonName(std::string_view bytes);

// `document` as text, names' stray bytes as surrogates.
std::string FormatJson(const nlohmann::json& document);

}  // namespace granary

#endif  // GRANARY_COMMON_REPORTS_JSON_DOCUMENTS_H_
