#include "common/reports/job_reads_json.h"

#include <string>
#include <vector>

#include "common/dataset/chunk_key.h"
#include "common/jobs/read_origin.h"

namespace granary {

nlohmann::json JobReadsJson(const v1::JobReads& reads) {
  nlohmann::json bytes = nlohmann::json::object();
  nlohmann::json counts = nlohmann::json::object();
  nlohmann::json waits = nlohmann::json::object();
  uint64_t bytes_read = 0;
  uint64_t read_wait_ns = 0;
  for (int i = 0; i < kReadOrigins; ++i) {
    const std::string origin(ReadOriginName(static_cast<ReadOrigin>(i)));
    const uint64_t origin_bytes = i < reads.bytes_size() ? reads.bytes(i) : 0;
    const uint64_t origin_wait = i < reads.wait_ns_size() ? reads.wait_ns(i) : 0;
    bytes[origin] = origin_bytes;
    counts[origin] = i < reads.reads_size() ? reads.reads(i) : 0;
    waits[origin] = origin_wait / 1e9;
    bytes_read += origin_bytes;
    read_wait_ns += origin_wait;
  }
  nlohmann::json document = {
      {"job", reads.job()},
      {"dataset", reads.dataset()},
  };
  if (reads.version() != 0) document["version"] = FormatVersion(reads.version());
  document.update({
      {"files_opened", reads.files_opened()},
      {"bytes_read", bytes_read},
      {"bytes", std::move(bytes)},
      {"reads", std::move(counts)},
      {"wait_seconds", (read_wait_ns + reads.open_wait_ns()) / 1e9},
      {"open_wait_seconds", reads.open_wait_ns() / 1e9},
      {"read_wait_seconds", std::move(waits)},
      {"errors", reads.errors()},
      {"first_read_unix_ms", reads.first_read_unix_ms()},
      {"last_read_unix_ms", reads.last_read_unix_ms()},
  });
  return document;
}

nlohmann::json JobReceiptJson(const v1::JobReceipt& receipt) {
  nlohmann::json reads = nlohmann::json::array();
  for (const v1::JobReads& version : receipt.reads()) {
    nlohmann::json entry = JobReadsJson(version);
    entry.erase("job");
    reads.push_back(std::move(entry));
  }
  return {
      {"job", receipt.job()},
      {"node_id", receipt.node_id()},
      {"group", receipt.group()},
      {"started_unix_ms", receipt.started_unix_ms()},
      {"ended_unix_ms", receipt.ended_unix_ms()},
      {"reader_uids",
       std::vector<uint32_t>(receipt.reader_uids().begin(), receipt.reader_uids().end())},
      {"reads", std::move(reads)},
  };
}

}  // namespace granary
