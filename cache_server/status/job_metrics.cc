#include "cache_server/status/job_metrics.h"

#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"

namespace granary {
namespace {

// A label value as the exposition format quotes it.
std::string Quoted(std::string_view value) {
  std::string quoted = "\"";
  for (char c : value) {
    if (c == '\\' || c == '"') {
      quoted += '\\';
      quoted += c;
    } else if (c == '\n') {
      quoted += "\\n";
    } else {
      quoted += c;
    }
  }
  quoted += '"';
  return quoted;
}

void Header(std::string* out, absl::string_view name, absl::string_view type,
            absl::string_view help) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

std::string Seconds(uint64_t nanoseconds) { return absl::StrCat(nanoseconds / 1e9); }

// A pair's labels; "job_id", since Prometheus sets "job" on every series
// itself (the scrape job's name).
std::string Labels(const v1::JobReads& job) {
  return absl::StrCat("job_id=", Quoted(job.job()), ",dataset=", Quoted(job.dataset()));
}

uint64_t At(const google::protobuf::RepeatedField<uint64_t>& values, int index) {
  return index < values.size() ? values.Get(index) : 0;
}

// Every pair's value of one per-origin figure.
void ByOrigin(const JobLedger::Listing& listing, absl::string_view name, absl::string_view help,
              const google::protobuf::RepeatedField<uint64_t>& (v1::JobReads::*field)() const,
              bool seconds, std::string* out) {
  Header(out, name, "counter", help);
  for (const v1::JobReads& job : listing.jobs) {
    const std::string labels = Labels(job);
    for (int origin = 0; origin < kReadOrigins; ++origin) {
      const uint64_t value = At((job.*field)(), origin);
      absl::StrAppend(out, name, "{", labels, ",origin=\"",
                      AsAbsl(ReadOriginName(static_cast<ReadOrigin>(origin))), "\"} ",
                      seconds ? Seconds(value) : absl::StrCat(value), "\n");
    }
  }
}

}  // namespace

void RenderJobMetrics(const JobLedger::Listing& listing, std::string* out) {
  Header(out, "granary_jobs_tracked", "gauge", "Jobs and datasets whose reads are listed apart.");
  absl::StrAppend(out, "granary_jobs_tracked ", listing.jobs.size(), "\n");
  Header(out, "granary_jobs_folded_total", "counter",
         "Jobs and datasets idle or beyond max_job_series, summed into job_id=\"other\".");
  absl::StrAppend(out, "granary_jobs_folded_total ", listing.folded_jobs, "\n");

  Header(out, "granary_job_files_opened_total", "counter", "Files a job opened.");
  for (const v1::JobReads& job : listing.jobs) {
    absl::StrAppend(out, "granary_job_files_opened_total{", Labels(job), "} ", job.files_opened(),
                    "\n");
  }
  ByOrigin(listing, "granary_job_read_bytes_total", "Bytes a job read, by where they came from.",
           &v1::JobReads::bytes, /*seconds=*/false, out);
  ByOrigin(listing, "granary_job_reads_total", "Reads of a job, by their slowest origin.",
           &v1::JobReads::reads, /*seconds=*/false, out);
  ByOrigin(listing, "granary_job_wait_seconds_total",
           "Time a job's readers waited in reads, by the read's slowest origin.",
           &v1::JobReads::wait_ns, /*seconds=*/true, out);
  Header(out, "granary_job_open_wait_seconds_total", "counter",
         "Time a job's readers waited in opens.");
  for (const v1::JobReads& job : listing.jobs) {
    absl::StrAppend(out, "granary_job_open_wait_seconds_total{", Labels(job), "} ",
                    Seconds(job.open_wait_ns()), "\n");
  }
  Header(out, "granary_job_read_errors_total", "counter", "Reads and opens of a job that failed.");
  for (const v1::JobReads& job : listing.jobs) {
    absl::StrAppend(out, "granary_job_read_errors_total{", Labels(job), "} ", job.errors(), "\n");
  }
  Header(out, "granary_job_read_wait_seconds", "histogram", "Time a job's reads took.");
  for (const v1::JobReads& job : listing.jobs) {
    const std::string labels = Labels(job);
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= JobReadCounters::kWaitBounds.size(); ++i) {
      cumulative += At(job.wait_buckets(), static_cast<int>(i));
      const std::string bound = i < JobReadCounters::kWaitBounds.size()
                                    ? absl::StrCat(JobReadCounters::kWaitBounds[i])
                                    : "+Inf";
      absl::StrAppend(out, "granary_job_read_wait_seconds_bucket{", labels, ",le=\"", bound, "\"} ",
                      cumulative, "\n");
    }
    uint64_t wait = 0;
    for (uint64_t origin_wait : job.wait_ns()) wait += origin_wait;
    absl::StrAppend(out, "granary_job_read_wait_seconds_sum{", labels, "} ", Seconds(wait), "\n",
                    "granary_job_read_wait_seconds_count{", labels, "} ", cumulative, "\n");
  }
}

}  // namespace granary
