// Finding 8 of the trust-boundary issue: the HTTP endpoints (the scheduler
// extender's filter, prioritize and /healthz, granaryd's /metrics) against
// clients that hold connections, trickle bytes, send huge bodies or pods that
// name thousands of datasets. Real granaryd and granary-extender processes;
// requests with bodies are sent by an unprivileged local user with curl.
#include "common/net/http.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tests/scheduler_hooks/extender_process.h"
#include "tests/security/security_support.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {
namespace {

using nlohmann::json;

constexpr int kSlowClients = 100;
constexpr int kIdleClients = 100;
constexpr char kUser[] = "granary-http-attacker";
// granary-extender's default --max-body-bytes.
constexpr uint64_t kBodyLimit = 1 << 20;

// The process's peak resident set (VmHWM), in KiB.
uint64_t PeakRssKiB(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    uint64_t kib = 0;
    std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() >= 2 && absl::SimpleAtoi(fields[1], &kib)) return kib;
  }
  ADD_FAILURE() << "no VmHWM for pid " << pid;
  return 0;
}

int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// What arrived on `fd` within `timeout` (until the server closed it).
std::string Drain(int fd, std::chrono::milliseconds timeout) {
  std::string text;
  pollfd poll_fd{fd, POLLIN, 0};
  char buffer[1024];
  while (::poll(&poll_fd, 1, static_cast<int>(timeout.count())) > 0) {
    ssize_t got = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (got <= 0) break;
    text.append(buffer, static_cast<size_t>(got));
  }
  return text;
}

// Connections held against one port: `kIdleClients` that send nothing and
// `kSlowClients` that send a request's first line and then one header byte
// every 500 ms, each recv() on the server prompt, the request never ending.
class HeldConnections {
 public:
  explicit HeldConnections(int port) {
    for (int i = 0; i < kIdleClients; ++i) idle_.push_back(Connect(port));
    for (int i = 0; i < kSlowClients; ++i) {
      int fd = Connect(port);
      if (fd >= 0) {
        constexpr std::string_view kStart = "GET /healthz HTTP/1.1\r\nX-Slow: ";
        (void)!::send(fd, kStart.data(), kStart.size(), MSG_NOSIGNAL);
      }
      slow_.push_back(fd);
    }
    trickler_ = std::thread([this] {
      while (!stop_.load()) {
        for (int fd : slow_) {
          if (fd >= 0) (void)!::send(fd, "s", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        for (int i = 0; i < 10 && !stop_.load(); ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }
    });
  }
  ~HeldConnections() {
    StopTrickling();
    for (int fd : idle_) ::close(fd);
    for (int fd : slow_) ::close(fd);
  }

  int connected() const {
    int count = 0;
    for (const std::vector<int>* fds : {&idle_, &slow_}) {
      for (int fd : *fds) count += fd >= 0;
    }
    return count;
  }
  void StopTrickling() {
    stop_.store(true);
    if (trickler_.joinable()) trickler_.join();
  }
  // How many slow clients were answered `status_line` (after the server's
  // request deadline).
  int SlowAnswered(std::string_view status_line) {
    int answered = 0;
    for (int fd : slow_) {
      if (fd >= 0 && Drain(fd, std::chrono::milliseconds(200)).rfind(status_line, 0) == 0) {
        ++answered;
      }
    }
    return answered;
  }

 private:
  std::vector<int> idle_;
  std::vector<int> slow_;
  std::atomic<bool> stop_{false};
  std::thread trickler_;
};

// GET http://127.0.0.1:port/path with a 5 s read timeout; the status or -1.
int Probe(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5);
  client.set_read_timeout(5);
  httplib::Result result = client.Get(path);
  return result ? result->status : -1;
}

int PortOf(const std::string& host_port) {
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(host_port.substr(host_port.rfind(':') + 1), &port)) << host_port;
  return port;
}

// ExtenderArgs for a pod annotated with `datasets`, in the NodeNames form.
json Args(const std::string& datasets) {
  return {{"Pod",
           {{"metadata", {{"name", "p"}, {"annotations", {{"granary.io/datasets", datasets}}}}}}},
          {"Nodes", nullptr},
          {"NodeNames", json::array({"node-a", "node-b"})}};
}

class HttpSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<TestUser> user = EnsureTestUser(kUser);
    ASSERT_TRUE(user.ok()) << user.status();
    user_ = *user;
    ::chmod(temp_.path().c_str(), 0755);
    auto server = GranarydProcess::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  // `body` written to a file the attacker can read.
  std::string BodyFile(const std::string& name, const std::string& body) {
    std::string path = temp_.path() + "/" + name;
    std::ofstream(path, std::ios::binary) << body;
    ::chmod(path.c_str(), 0644);
    return path;
  }

  // POSTs the file at `body_path` to `url` with curl as the attacker; the
  // HTTP status and the body curl received. `headers` are added as -H.
  std::pair<int, std::string> CurlPost(const std::string& url, const std::string& body_path,
                                       const std::vector<std::string>& headers = {}) {
    std::vector<std::string> argv = {"/usr/bin/curl",
                                     "-sS",
                                     "--max-time",
                                     "60",
                                     "-o",
                                     "-",
                                     "-w",
                                     "\n%{http_code}",
                                     "--data-binary",
                                     "@" + body_path,
                                     "-H",
                                     "Content-Type: application/json"};
    for (const std::string& header : headers) {
      argv.push_back("-H");
      argv.push_back(header);
    }
    argv.push_back(url);
    absl::StatusOr<CommandResult> result = RunAs(user_, argv, std::chrono::seconds(90));
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return {-1, ""};
    std::string out = result->stdout_text;
    size_t last = out.rfind('\n');
    int status = -1;
    if (last == std::string::npos || !absl::SimpleAtoi(out.substr(last + 1), &status)) {
      return {-1, out + result->stderr_text};
    }
    return {status, out.substr(0, last)};
  }

  TempDir temp_;
  TestUser user_;
  std::unique_ptr<GranarydProcess> server_;
};

TEST_F(HttpSecurityTest, SlowAndIdleClientsDoNotBlockHealthOrMetrics) {
  ExtenderProcess extender(server_->socket_address());
  const int extender_port = extender.port();
  const int metrics_port = PortOf(server_->metrics_address());

  HeldConnections on_extender(extender_port);
  HeldConnections on_metrics(metrics_port);
  ASSERT_EQ(on_extender.connected(), kSlowClients + kIdleClients);
  ASSERT_EQ(on_metrics.connected(), kSlowClients + kIdleClients);
  // The held connections are all in; probe while they trickle.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  int healthz_ok = 0, metrics_ok = 0;
  for (int probe = 0; probe < 5; ++probe) {
    healthz_ok += Probe(extender_port, "/healthz") == 200;
    metrics_ok += Probe(metrics_port, "/metrics") == 200;
  }
  EXPECT_EQ(healthz_ok, 5);
  EXPECT_EQ(metrics_ok, 5);

  // The slow requests are cut off by the request deadline, however promptly
  // each byte came: both servers keep HttpServerOptions' default, and the
  // deadline passing is the point, so it is waited out.
  std::this_thread::sleep_for(HttpServerOptions().request_timeout + std::chrono::seconds(1));
  on_extender.StopTrickling();
  on_metrics.StopTrickling();
  const int extender_408 = on_extender.SlowAnswered("HTTP/1.1 408");
  const int metrics_408 = on_metrics.SlowAnswered("HTTP/1.1 408");
  EXPECT_EQ(extender_408, kSlowClients);
  EXPECT_EQ(metrics_408, kSlowClients);

  ReportAttack({"8",
                "100 connections trickling header bytes (one every 500 ms) and 100 idle ones, "
                "held against granary-extender, while /healthz is probed 5 times",
                "HTTP (extender)", "/healthz answers; the slow requests are cut off with 408",
                absl::StrCat(healthz_ok, "/5 probes answered 200; ", extender_408,
                             "/100 slow clients got 408 after the 10 s request deadline")});
  ReportAttack({"8",
                "the same 200 connections held against granaryd's metrics endpoint while "
                "/metrics is scraped 5 times",
                "HTTP (metrics)", "/metrics answers; the slow requests are cut off with 408",
                absl::StrCat(metrics_ok, "/5 scrapes answered 200; ", metrics_408,
                             "/100 slow clients got 408 after the 10 s request deadline")});
}

TEST_F(HttpSecurityTest, BodiesOverTheLimitAreRefusedWithoutTheMemory) {
  ExtenderProcess extender(server_->socket_address());
  const std::string url = absl::StrCat("http://", extender.address(), "/filter");
  // A valid ExtenderArgs of 110 MB: 6.5 million candidate node names.
  const std::string path = temp_.path() + "/huge.json";
  {
    std::ofstream out(path, std::ios::binary);
    out << R"({"Pod": {"metadata": {"name": "p", "annotations": {"granary.io/datasets": )"
        << R"("imagenet"}}}, "Nodes": null, "NodeNames": ["node-a")";
    for (int i = 0; i < 6'500'000; ++i) out << ",\"gpu-node-" << i << '"';
    out << "]}";
  }
  ::chmod(path.c_str(), 0644);
  ASSERT_GT(std::filesystem::file_size(path), 110u << 20);

  const uint64_t start_kib = PeakRssKiB(extender.pid());
  // curl would wait for a 100 Continue; without it, it sends the whole body.
  auto [status, reply] = CurlPost(url, path, {"Expect:"});
  EXPECT_EQ(status, 413);
  const std::string refusal = absl::StrCat("request body of ", std::filesystem::file_size(path),
                                           " bytes exceeds the limit of ", kBodyLimit, " bytes\n");
  EXPECT_EQ(reply, refusal);
  const uint64_t after_length_kib = PeakRssKiB(extender.pid());
  // Refused from its Content-Length: none of the body was kept.
  EXPECT_LT(after_length_kib - start_kib, 1024u) << start_kib << " -> " << after_length_kib;

  auto [chunked_status, chunked_reply] =
      CurlPost(url, path, {"Expect:", "Transfer-Encoding: chunked"});
  EXPECT_EQ(chunked_status, 413);
  EXPECT_EQ(chunked_reply,
            absl::StrCat("chunked request body exceeds the limit of ", kBodyLimit, " bytes\n"));
  const uint64_t after_chunked_kib = PeakRssKiB(extender.pid());
  // Decoded up to the limit, then refused: at most the limit and a copy while
  // the buffer grows, never the body.
  EXPECT_LT(after_chunked_kib - after_length_kib, 2 * kBodyLimit / 1024 + 1024)
      << after_length_kib << " -> " << after_chunked_kib;
  EXPECT_EQ(Probe(extender.port(), "/healthz"), 200);

  ReportAttack(
      {"8",
       absl::StrCat(kUser,
                    " POSTs a valid 110 MB ExtenderArgs to /filter, with "
                    "Content-Length and then chunked"),
       "HTTP (extender)",
       "413 naming the limit; the body is not buffered (Content-Length) or only up to the limit "
       "(chunked)",
       absl::StrCat("HTTP ", status, " '", reply.substr(0, reply.size() - 1), "'; HTTP ",
                    chunked_status, " '", chunked_reply.substr(0, chunked_reply.size() - 1),
                    "'; extender VmHWM ", start_kib, " KiB at start, ", after_length_kib,
                    " KiB after the first, ", after_chunked_kib,
                    " KiB after the second (body limit 1024 KiB)")});
}

TEST_F(HttpSecurityTest, TwentyThousandDatasetsInOneAnnotationCostNoLocateCall) {
  auto counter =
      LocateCounter::Start(temp_.path() + "/locate-counter.sock", server_->socket_address());
  ASSERT_TRUE(counter.ok()) << counter.status();
  ExtenderProcess extender((*counter)->address());
  std::string datasets;
  for (int i = 0; i < 20000; ++i) absl::StrAppend(&datasets, i ? "," : "", "dataset-", i);
  const std::string path = BodyFile("names.json", Args(datasets).dump());
  const std::string refusal =
      "the pod names 20000 datasets (Granary volumes and annotation granary.io/datasets); at most "
      "64 are allowed";

  auto [filter_status, filter_reply] =
      CurlPost(absl::StrCat("http://", extender.address(), "/filter"), path);
  EXPECT_EQ(filter_status, 200);
  json filter = json::parse(filter_reply, nullptr, false);
  EXPECT_EQ(filter["Error"], "granary: " + refusal) << filter_reply;
  EXPECT_TRUE(filter["NodeNames"].is_null()) << filter_reply;
  auto [prioritize_status, prioritize_reply] =
      CurlPost(absl::StrCat("http://", extender.address(), "/prioritize"), path);
  EXPECT_EQ(prioritize_status, 400);
  EXPECT_EQ(prioritize_reply, refusal + "\n");
  EXPECT_EQ((*counter)->calls(), 0);

  ReportAttack({"8",
                absl::StrCat(kUser,
                             " POSTs a pod whose granary.io/datasets names 20,000 datasets "
                             "to /filter and /prioritize"),
                "HTTP (extender)",
                "refused naming the annotation, the count and the cap; no Locate call",
                absl::StrCat("filter: HTTP ", filter_status, ", Error '",
                             filter["Error"].is_string() ? filter["Error"].get<std::string>() : "",
                             "'; prioritize: HTTP ", prioritize_status,
                             "; Locate calls made: ", (*counter)->calls())});
}

TEST_F(HttpSecurityTest, MalformedRequestsAreRefused) {
  ExtenderProcess extender(server_->socket_address());
  const std::string url = absl::StrCat("http://", extender.address(), "/filter");
  auto [json_status, json_reply] = CurlPost(url, BodyFile("bad.json", R"({"Pod": [)"));
  EXPECT_EQ(json_status, 400);
  EXPECT_EQ(json_reply, "request body is not a JSON ExtenderArgs object\n");
  auto [header_status, header_reply] =
      CurlPost(url, BodyFile("small.json", Args("imagenet").dump()),
               {"X-Filler: " + std::string(20000, 'h')});
  EXPECT_EQ(header_status, 431);
  EXPECT_EQ(header_reply, "request line and headers exceed the limit of 16384 bytes\n");

  ReportAttack(
      {"8", absl::StrCat(kUser, " POSTs malformed JSON to /filter"), "HTTP (extender)",
       "400 naming the problem",
       absl::StrCat("HTTP ", json_status, " '", json_reply.substr(0, json_reply.size() - 1), "'")});
  ReportAttack({"new", absl::StrCat(kUser, " sends a 20 KB header to /filter"), "HTTP (extender)",
                "431 naming the limit",
                absl::StrCat("HTTP ", header_status, " '",
                             header_reply.substr(0, header_reply.size() - 1), "'")});
}

}  // namespace
}  // namespace granary::testing
