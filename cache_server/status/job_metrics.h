// RenderJobMetrics writes the jobs' reads on this node (JobLedger totals) as
// Prometheus text, appended to granaryd's /metrics. Series are per job and
// dataset, so their number is bounded by the ledger's (granaryd's
// `max_job_series`, plus one job_id="other" series summing the folded jobs).
// The job's label is job_id ("slurm:ID", "pod:UID", "uid:N"): Prometheus
// sets "job" on every series itself, the name of its scrape job.
//   granary_job_files_opened_total{job_id,dataset}
//   granary_job_read_bytes_total{job_id,dataset,origin}  origin: memory,
//                                       passthrough, local, peer, source
//   granary_job_reads_total{job_id,dataset,origin}
//   granary_job_wait_seconds_total{job_id,dataset,origin}  readers' wait, by
//                                       the read's slowest origin
//   granary_job_open_wait_seconds_total{job_id,dataset}
//   granary_job_read_errors_total{job_id,dataset}
//   granary_job_read_wait_seconds{job_id,dataset}  histogram of read waits
//   granary_jobs_tracked                (job, dataset) pairs listed
//   granary_jobs_folded_total           pairs folded into job_id="other"
//
// Thread-safety: a pure function.
#ifndef GRANARY_CACHE_SERVER_STATUS_JOB_METRICS_H_
#define GRANARY_CACHE_SERVER_STATUS_JOB_METRICS_H_

#include <string>

#include "common/jobs/job_reads.h"

namespace granary {

void RenderJobMetrics(const JobLedger::Listing& listing, std::string* out);

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_STATUS_JOB_METRICS_H_
