// granaryd's status page in a real browser: a real granaryd with a registered
// dataset, reads of it attributed to the job that made them (the Python
// client's batch over the local socket) and a hold placed for a Slurm job;
// `/` loaded in headless Chromium shows, once its script has run, the figures
// `granary status --json`, `granary locate --json`, `granary jobs --json`
// and `granary holds --json` show, and /metrics has the same holds.
// /status.json names no source path and no address, and other paths are
// not found.
//
// With GRANARY_STATUS_PAGE_SCREENSHOT=PATH the test also saves its screenshot
// of the page there (bench/RESULTS.md, "The status page").
#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/net/http.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "nlohmann/json.hpp"
#include "proto/staging.grpc.pb.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {
namespace {

constexpr char kDataset[] = "images";
constexpr char kHolder[] = "slurm:4242";
constexpr int kFiles = 3;

// Exit code and standard output of `sh -c command`; standard error goes to
// `log` (Chromium writes much there that is no failure).
std::pair<int, std::string> RunShell(const std::string& command, const std::string& log) {
  FILE* pipe = ::popen(absl::StrCat(command, " 2>>", log).c_str(), "r");
  if (pipe == nullptr) return {-1, ""};
  std::string output;
  char buffer[65536];
  for (size_t n; (n = ::fread(buffer, 1, sizeof(buffer), pipe)) > 0;) output.append(buffer, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

class StatusPageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = temp_.path() + "/commands.log";
    source_ = temp_.path() + "/" + kDataset;
    std::filesystem::create_directories(source_);
    for (int i = 0; i < kFiles; ++i) {
      std::ofstream(absl::StrCat(source_, "/", i, ".jpg")) << std::string(300'000 + i, 'a' + i);
    }
    absl::StatusOr<std::unique_ptr<GranarydProcess>> server = GranarydProcess::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    Cli({"dataset", "add", kDataset, source_, "--chunk-size", "1MiB"});
  }

  std::string Log() const {
    std::ifstream in(log_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // `granary ARGS` against the server; its output parsed when it is JSON.
  nlohmann::json Cli(const std::vector<std::string>& args) {
    std::string command = absl::StrCat(GRANARY_CLI_PATH, " --server ", server_->socket_address());
    for (const std::string& arg : args) absl::StrAppend(&command, " '", arg, "'");
    auto [code, output] = RunShell(command, log_);
    EXPECT_EQ(code, 0) << command << "\n" << Log();
    return nlohmann::json::parse(output, nullptr, /*allow_exceptions=*/false);
  }

  // The page as Chromium has drawn it once its script ran.
  std::string RenderedPage() {
    auto [code, dom] = RunShell(absl::StrCat(Chromium(), " --dump-dom ", PageUrl()), log_);
    EXPECT_EQ(code, 0) << Log();
    return dom;
  }

  std::string Chromium() const {
    // As root, Chromium runs only without its sandbox.
    return absl::StrCat(GRANARY_CHROMIUM_PATH,
                        " --headless --no-sandbox --disable-gpu --hide-scrollbars"
                        " --user-data-dir=",
                        temp_.path(), "/chromium --virtual-time-budget=5000");
  }
  std::string PageUrl() const { return absl::StrCat("http://", server_->metrics_address(), "/"); }

  TempDir temp_;
  std::string log_;
  std::string source_;
  std::unique_ptr<GranarydProcess> server_;
};

// Every figure the page shows: data-key to data-value.
std::map<std::string, std::string> Figures(const std::string& dom) {
  std::map<std::string, std::string> figures;
  static const std::regex kFigure(R"re(data-key="([^"]*)" data-value="([^"]*)")re");
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), kFigure);
       it != std::sregex_iterator(); ++it) {
    figures[absl::StrReplaceAll((*it)[1].str(), {{"&amp;", "&"}})] = (*it)[2].str();
  }
  return figures;
}

// The page's text for a JSON number `value`, as JavaScript's String() writes it.
void ExpectFigure(const std::map<std::string, std::string>& figures, const std::string& key,
                  const nlohmann::json& value) {
  auto it = figures.find(key);
  ASSERT_NE(it, figures.end()) << "the page shows no " << key;
  if (value.is_null()) {
    EXPECT_EQ(it->second, "null") << key;
    return;
  }
  double shown = 0;
  ASSERT_TRUE(absl::SimpleAtod(it->second, &shown)) << key << ": " << it->second;
  const double expected = value.get<double>();
  EXPECT_NEAR(shown, expected, std::abs(expected) * 1e-12) << key;
}

TEST_F(StatusPageTest, ChromiumShowsTheFiguresTheCliShows) {
  // A job reads every file through the Python client's batch.
  std::string files;
  for (int i = 0; i < kFiles; ++i) absl::StrAppend(&files, i == 0 ? "" : ", ", "'", i, ".jpg'");
  auto [read_code, read_output] = RunShell(
      absl::StrCat("env PYTHONPATH=", GRANARY_PYTHON_PATH,
                   " /usr/bin/python3 -c \"import granary; granary.Client('",
                   server_->socket_path(), "').read_many('", kDataset, "', [", files, "])\""),
      log_);
  ASSERT_EQ(read_code, 0) << Log();
  ASSERT_TRUE(server_->WaitForWriteBehind().ok());
  // The scheduler hook's hold, as a stage-in places it.
  v1::PlaceHoldRequest hold;
  hold.set_holder(kHolder);
  hold.add_datasets(kDataset);
  hold.set_lease_ms(3'600'000);
  grpc::ClientContext context;
  v1::PlaceHoldResponse placed;
  ASSERT_TRUE(
      v1::Staging::NewStub(server_->SocketChannel())->PlaceHold(&context, hold, &placed).ok());

  const nlohmann::json status = Cli({"status", "--json"});
  const nlohmann::json locate = Cli({"locate", kDataset, "--json"});
  const nlohmann::json jobs = Cli({"jobs", "--json"});
  const nlohmann::json holds = Cli({"holds", "--json"});
  ASSERT_EQ(jobs["jobs"].size(), 1u) << jobs.dump(2);
  const nlohmann::json& job = jobs["jobs"][0];
  ASSERT_EQ(job["files_opened"], kFiles) << jobs.dump(2);
  ASSERT_EQ(holds["nodes"][0]["holds"].size(), 1u) << holds.dump(2);

  const std::string dom = RenderedPage();
  const std::map<std::string, std::string> figures = Figures(dom);
  const nlohmann::json& node = status["nodes"][0];
  EXPECT_NE(dom.find(absl::StrCat("Granary node ", node["node_id"].get<std::string>(), " (group ",
                                  node["group"].get<std::string>(), ")")),
            std::string::npos)
      << dom;
  for (const char* field : {"used_bytes", "capacity_bytes", "hit_ratio", "bytes_from_cache",
                            "bytes_from_source", "chunk_count"}) {
    ExpectFigure(figures, absl::StrCat("node/", field), node[field]);
  }
  ExpectFigure(figures, "node/dataset_count", status["dataset_count"]);

  const std::string dataset = absl::StrCat("dataset/", kDataset, "/");
  EXPECT_EQ(figures.at(dataset + "name"), kDataset);
  ExpectFigure(figures, dataset + "total_bytes", locate["total_bytes"]);
  ASSERT_FALSE(locate["groups"].empty());
  for (const nlohmann::json& group : locate["groups"]) {
    const std::string key = absl::StrCat(dataset, "group/", group["group"].get<std::string>(), "/");
    ExpectFigure(figures, key + "cached_bytes", group["cached_bytes"]);
    ExpectFigure(figures, key + "fraction", group["fraction"]);
  }

  const std::string job_key =
      absl::StrCat("job/", job["job"].get<std::string>(), "/", kDataset, "/");
  EXPECT_NE(dom.find(absl::StrCat("<td>", job["job"].get<std::string>(), "</td>")),
            std::string::npos);
  for (const char* field :
       {"files_opened", "bytes_read", "wait_seconds", "open_wait_seconds", "errors"}) {
    ExpectFigure(figures, job_key + field, job[field]);
  }
  // Each origin a job's bytes or waits went to; the others are left out.
  for (const char* by_origin : {"bytes", "read_wait_seconds"}) {
    ASSERT_FALSE(job[by_origin].empty());
    for (const auto& [origin, value] : job[by_origin].items()) {
      const std::string key = absl::StrCat(job_key, by_origin, "/", origin);
      if (value.get<double>() > 0) {
        ExpectFigure(figures, key, value);
      } else {
        EXPECT_FALSE(figures.contains(key)) << key;
      }
    }
  }

  const nlohmann::json& node_holds = holds["nodes"][0];
  ExpectFigure(figures, absl::StrCat("hold/", kHolder, "/", kDataset, "/bytes"),
               node_holds["holds"][0]["bytes"]);
  ExpectFigure(figures, "holds/held_bytes", node_holds["held_bytes"]);
  ExpectFigure(figures, "holds/share_bytes", node_holds["share_bytes"]);
  // /metrics has the same holds for Grafana.
  EXPECT_EQ(server_->Metric("granary_hold_held_bytes").value_or(-1),
            node_holds["held_bytes"].get<double>());
  EXPECT_EQ(server_->Metric("granary_hold_share_bytes").value_or(-1),
            node_holds["share_bytes"].get<double>());
  EXPECT_EQ(server_->Metric("granary_holds").value_or(-1), 1);

  // A screenshot of the page as drawn.
  const std::string screenshot = temp_.path() + "/status_page.png";
  auto [shot_code, shot_output] =
      RunShell(absl::StrCat(Chromium(), " --window-size=1500,1000 --screenshot=", screenshot, " ",
                            PageUrl()),
               log_);
  ASSERT_EQ(shot_code, 0) << Log();
  std::ifstream png(screenshot, std::ios::binary);
  std::string magic(8, '\0');
  png.read(magic.data(), 8);
  EXPECT_EQ(magic, "\x89PNG\r\n\x1a\n");
  EXPECT_GT(std::filesystem::file_size(screenshot), 10'000u);
  if (const char* keep = std::getenv("GRANARY_STATUS_PAGE_SCREENSHOT")) {
    std::filesystem::copy_file(screenshot, keep, std::filesystem::copy_options::overwrite_existing);
  }
}

TEST_F(StatusPageTest, TheDocumentNamesNoSourceNorAddress) {
  absl::StatusOr<std::string> document = HttpGet(server_->metrics_address(), "/status.json");
  ASSERT_TRUE(document.ok()) << document.status();
  const nlohmann::json parsed = nlohmann::json::parse(*document);
  EXPECT_EQ(parsed["datasets"][0]["name"], kDataset);
  EXPECT_EQ(document->find(source_), std::string::npos) << *document;
  EXPECT_EQ(document->find(server_->socket_path()), std::string::npos) << *document;
  EXPECT_EQ(document->find(server_->tcp_address()), std::string::npos) << *document;
}

TEST_F(StatusPageTest, OtherPathsAreNotFound) {
  absl::StatusOr<std::string> page = HttpGet(server_->metrics_address(), "/");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_NE(page->find("/status.json"), std::string::npos);
  absl::StatusOr<std::string> missing = HttpGet(server_->metrics_address(), "/status.html");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("404"), std::string::npos) << missing.status();
}

}  // namespace
}  // namespace granary::testing
