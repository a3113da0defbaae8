// PrometheusServer runs a real Prometheus (Debian's /usr/bin/prometheus) that
// scrapes one target every second as scrape job "granary", for tests of the
// series granaryd publishes, and asks its HTTP API instant PromQL queries.
// The process is killed, and its data removed, when the object is destroyed.
//
// Thread-safety: not thread-safe; use one object from one thread.
#ifndef GRANARY_TESTS_JOBS_PROMETHEUS_SERVER_H_
#define GRANARY_TESTS_JOBS_PROMETHEUS_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tests/support/granaryd_process.h"

namespace granary::testing {

class PrometheusServer {
 public:
  // Starts Prometheus scraping `target` (HOST:PORT serving /metrics).
  static absl::StatusOr<std::unique_ptr<PrometheusServer>> Start(const std::string& target);
  ~PrometheusServer();
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  // The result (data.result) of instant query `promql`; null if the query
  // failed or Prometheus does not answer yet.
  nlohmann::json Query(const std::string& promql);

  // Everything Prometheus logged so far.
  std::string log() const;

 private:
  PrometheusServer() = default;

  TempDir dir_;
  std::string address_;
  pid_t pid_ = -1;
};

}  // namespace granary::testing

#endif  // GRANARY_TESTS_JOBS_PROMETHEUS_SERVER_H_
