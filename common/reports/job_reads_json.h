// The JSON form of what jobs read, one shape wherever it is shown: a job's
// figures for one dataset (`granary jobs --json`), and a job's receipt
// (`granary jobs --receipt JOB --json`, and the file granaryd writes to
// receipt_dir). Sizes are integers in bytes, waits seconds, bytes, reads
// and read waits by origin ("memory", "passthrough", "local", "peer",
// "source"), dataset versions 16-digit hex strings as `granary dataset show`
// prints them. Job and dataset names are ASCII (common/jobs/job_identity.h,
// ValidateDatasetName), so no name needs escaping beyond JSON's own.
//
// Thread-safety: pure functions.
#ifndef GRANARY_COMMON_REPORTS_JOB_READS_JSON_H_
#define GRANARY_COMMON_REPORTS_JOB_READS_JSON_H_

#include "nlohmann/json.hpp"
#include "proto/jobs.pb.h"

namespace granary {

// "job" and "dataset" (empty for folded jobs), "version" when the figures are of
// one version, then the figures.
nlohmann::json JobReadsJson(const v1::JobReads& reads);

// The job, its node and group, start and end, the uids that read, and one
// JobReadsJson per dataset version it read.
nlohmann::json JobReceiptJson(const v1::JobReceipt& receipt);

}  // namespace granary

#endif  // GRANARY_COMMON_REPORTS_JOB_READS_JSON_H_
