#include "tests/scheduler_hooks/extender_process.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tests/support/child_process.h"

namespace granary::testing {

std::string ExtenderPath() { return GRANARY_TEST_EXTENDER_PATH; }

void AddDataset(GranarydProcess& server, const std::string& root, const std::string& name,
                const std::vector<std::pair<std::string, int>>& files,
                const std::vector<std::string>& prewarm) {
  std::string source = root + "/" + name;
  std::filesystem::create_directories(source);
  const std::string block(kMiB, 'g');
  for (const auto& [file, mib] : files) {
    std::ofstream out(source + "/" + file, std::ios::binary);
    for (int i = 0; i < mib; ++i) out.write(block.data(), block.size());
  }
  auto stub = server.SocketStub();
  {
    grpc::ClientContext context;
    v1::AddDatasetRequest request;
    request.set_name(name);
    request.set_source(source);
    v1::DatasetInfo info;
    grpc::Status status = stub->AddDataset(&context, request, &info);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  if (prewarm.empty()) return;
  grpc::ClientContext context;
  v1::PrewarmRequest request;
  request.set_name(name);
  for (const std::string& path : prewarm) request.add_paths(path);
  auto reader = stub->Prewarm(&context, request);
  v1::PrewarmProgress progress;
  while (reader->Read(&progress)) {
  }
  grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(progress.failures_size(), 0);
}

ExtenderProcess::ExtenderProcess(const std::string& server, std::vector<std::string> extra_args) {
  port_ = FreeTcpPort();
  log_path_ = temp_.path() + "/extender.log";
  std::vector<std::string> args = {"--server", server, "--listen", address()};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  auto pid = SpawnChild(ExtenderPath(), args, log_path_);
  EXPECT_TRUE(pid.ok()) << pid.status();
  if (pid.ok()) pid_ = *pid;
  httplib::Client client("127.0.0.1", port_);
  for (int i = 0; i < 200; ++i) {
    if (auto result = client.Get("/healthz"); result && result->status == 200) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "granary-extender did not answer /healthz: " << log();
}

ExtenderProcess::~ExtenderProcess() {
  if (pid_ > 0) KillChild(pid_);
}

std::string ExtenderProcess::address() const { return absl::StrCat("127.0.0.1:", port_); }

std::string ExtenderProcess::log() const {
  std::ifstream in(log_path_);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::pair<int, std::string> ExtenderProcess::Post(const std::string& path,
                                                  const std::string& body) const {
  httplib::Client client("127.0.0.1", port_);
  auto result = client.Post(path, body, "application/json");
  if (!result) return {-1, httplib::to_string(result.error())};
  return {result->status, result->body};
}

nlohmann::json ExtenderProcess::PostJson(const std::string& path,
                                         const nlohmann::json& body) const {
  auto [status, reply] = Post(path, body.dump());
  EXPECT_EQ(status, 200) << reply;
  nlohmann::json parsed = nlohmann::json::parse(reply, nullptr, false);
  EXPECT_FALSE(parsed.is_discarded()) << reply;
  return parsed;
}

int ExtenderProcess::Terminate() {
  ::kill(pid_, SIGTERM);
  auto status = WaitForExit(pid_, std::chrono::seconds(10));
  if (!status) return -1;
  pid_ = -1;
  return WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
}

grpc::Status LocateCounter::Service::Locate(grpc::ServerContext*, const v1::LocateRequest* request,
                                            v1::LocateResponse* response) {
  calls.fetch_add(1);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return upstream->Locate(&context, *request, response);
}

absl::StatusOr<std::unique_ptr<LocateCounter>> LocateCounter::Start(const std::string& socket_path,
                                                                    const std::string& upstream) {
  std::unique_ptr<LocateCounter> counter(new LocateCounter());
  counter->socket_path_ = socket_path;
  counter->service_.upstream =
      v1::Granary::NewStub(grpc::CreateChannel(upstream, grpc::InsecureChannelCredentials()));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(counter->address(), grpc::InsecureServerCredentials());
  builder.RegisterService(&counter->service_);
  counter->server_ = builder.BuildAndStart();
  if (counter->server_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot serve on ", counter->address()));
  }
  return counter;
}

LocateCounter::~LocateCounter() {
  if (server_ != nullptr) server_->Shutdown();
}

}  // namespace granary::testing
