#include "tests/jobs/prometheus_server.h"

#include <cctype>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/net/http.h"
#include "tests/fuse/mounted_tree.h"
#include "tests/support/child_process.h"

namespace granary::testing {

absl::StatusOr<std::unique_ptr<PrometheusServer>> PrometheusServer::Start(
    const std::string& target) {
  std::unique_ptr<PrometheusServer> server(new PrometheusServer());
  const std::string config = server->dir_.path() + "/prometheus.yml";
  std::ofstream(config) << "global:\n  scrape_interval: 1s\n"
                        << "scrape_configs:\n  - job_name: granary\n    static_configs:\n"
                        << "      - targets: ['" << target << "']\n";
  server->address_ = absl::StrCat("127.0.0.1:", FreeTcpPort());
  absl::StatusOr<pid_t> pid =
      SpawnChild("/usr/bin/prometheus",
                 {"--config.file=" + config, "--storage.tsdb.path=" + server->dir_.path() + "/data",
                  "--web.listen-address=" + server->address_},
                 server->dir_.path() + "/log");
  if (!pid.ok()) return pid.status();
  server->pid_ = *pid;
  return server;
}

PrometheusServer::~PrometheusServer() {
  if (pid_ > 0) KillChild(pid_);
}

nlohmann::json PrometheusServer::Query(const std::string& promql) {
  std::string encoded;
  for (char c : promql) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
      encoded += c;
    } else {
      absl::StrAppendFormat(&encoded, "%%%02X", static_cast<unsigned char>(c));
    }
  }
  absl::StatusOr<std::string> answer =
      HttpGet(address_, absl::StrCat("/api/v1/query?query=", encoded));
  if (!answer.ok()) return nlohmann::json();
  nlohmann::json parsed = nlohmann::json::parse(*answer, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || parsed["status"] != "success") return nlohmann::json();
  return parsed["data"]["result"];
}

std::string PrometheusServer::log() const { return ReadWhole(dir_.path() + "/log"); }

}  // namespace granary::testing
