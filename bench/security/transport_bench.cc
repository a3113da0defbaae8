// What clients that hold connections or stall streams cost granaryd, and what
// they cost an authorised caller: granaryd's RSS, threads and descriptors, and
// the median latency of a `status` call over the Unix socket, idle and then
//   - with 1,000 idle connections (500 TCP from loopback, 500 on the Unix
//     socket as user nobody) that never speak HTTP/2, and
//   - with 100 ReadChunk streams of a 64 MiB chunk that never read (4
//     connections of 25 streams), measured before the watchdog cancels them.
// Latencies are ratios against the idle server of the same run.
//
// Usage: transport_bench [--calls=200]
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/net/server_address.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "proto/granary.grpc.pb.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granaryd_process.h"

namespace granary {
namespace {

using Clock = std::chrono::steady_clock;

struct Sample {
  uint64_t rss_bytes = 0;
  int threads = 0;
  int descriptors = 0;
  double status_median_us = 0;
};

uint64_t StatusField(pid_t pid, const std::string& field) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) == 0) return std::stoull(line.substr(field.size()));
  }
  return 0;
}

Sample Measure(pid_t pid, v1::Granary::Stub* stub, int calls) {
  Sample sample;
  sample.rss_bytes = StatusField(pid, "VmRSS:") * 1024;
  sample.threads = static_cast<int>(StatusField(pid, "Threads:"));
  sample.descriptors = static_cast<int>(
      std::distance(std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/fd")), {}));
  std::vector<double> micros;
  for (int i = 0; i < calls; ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::StatusRequest request;
    request.set_local_only(true);
    v1::StatusResponse response;
    auto start = Clock::now();
    grpc::Status answered = stub->Status(&context, request, &response);
    micros.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    if (!answered.ok())
      std::fprintf(stderr, "status failed: %s\n", answered.error_message().c_str());
  }
  std::sort(micros.begin(), micros.end());
  sample.status_median_us = micros[micros.size() / 2];
  return sample;
}

void Print(const char* what, const Sample& sample, const Sample& idle) {
  std::printf(
      "%-36s RSS %6.1f MiB  threads %4d  descriptors %5d  status median %7.1f us (%.2fx idle)\n",
      what, sample.rss_bytes / 1048576.0, sample.threads, sample.descriptors,
      sample.status_median_us, sample.status_median_us / idle.status_median_us);
}

int Run(int calls) {
  testing::TempDir source;
  testing::TempDir config;
  testing::WriteSourceFile(source.path(), "big.bin", testing::PatternBytes(64 << 20, 1));
  // nobody may connect to the socket, so its idle connections count under
  // its own uid, not under root's (whose status calls are measured).
  std::ofstream(config.path() + "/bench.yaml") << "socket_mode: 0666\n";
  auto server =
      testing::GranarydProcess::Start({.extra_args = {"--config", config.path() + "/bench.yaml"}});
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  std::filesystem::permissions(std::filesystem::path((*server)->socket_path()).parent_path(),
                               std::filesystem::perms::others_exec,
                               std::filesystem::perm_options::add);
  auto stub = (*server)->SocketStub();
  v1::DatasetInfo info;
  grpc::Status added = testing::AddDataset(stub.get(), "ds", source.path(), 64 << 20, &info);
  std::vector<v1::ManifestEntry> entries;
  if (!added.ok() || !testing::GetManifest(stub.get(), "ds", 0, &entries).ok()) return 1;
  uint64_t file_id = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].path() == "big.bin") file_id = i;
  }
  if (!testing::ReadChunk(stub.get(), info.version(), file_id, 0).status.ok()) return 1;
  const pid_t pid = (*server)->pid();

  Sample idle = Measure(pid, stub.get(), calls);
  Print("idle", idle, idle);

  std::vector<int> held;
  const int port =
      std::stoi((*server)->tcp_address().substr((*server)->tcp_address().rfind(':') + 1));
  for (int i = 0; i < 500; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
      held.push_back(fd);
    } else {
      ::close(fd);
    }
  }
  std::thread as_nobody([&] {
    const uid_t nobody = 65534;
    if (::syscall(SYS_setgroups, 0, nullptr) != 0 ||
        ::syscall(SYS_setresgid, nobody, nobody, nobody) != 0 ||
        ::syscall(SYS_setresuid, nobody, nobody, nobody) != 0) {
      return;
    }
    auto address = UnixSocketAddress((*server)->socket_path());
    for (int i = 0; i < 500; ++i) {
      int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&*address), sizeof(*address)) == 0) {
        held.push_back(fd);
      } else {
        ::close(fd);
      }
    }
  });
  as_nobody.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  Sample idle_connections = Measure(pid, stub.get(), calls);
  Print(absl::StrCat(held.size(), " idle connections").c_str(), idle_connections, idle);
  for (int fd : held) ::close(fd);
  std::this_thread::sleep_for(std::chrono::seconds(2));

  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  arguments.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  arguments.SetMaxReceiveMessageSize(-1);
  grpc::CompletionQueue queue;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<v1::Granary::Stub>> stalled_stubs;
  std::vector<std::unique_ptr<grpc::ClientAsyncReader<v1::ReadChunkResponse>>> readers;
  for (int connection = 0; connection < 4; ++connection) {
    arguments.SetInt("granary.bench.connection", connection);
    stalled_stubs.push_back(v1::Granary::NewStub(grpc::CreateCustomChannel(
        (*server)->tcp_address(), grpc::InsecureChannelCredentials(), arguments)));
    for (int i = 0; i < 25; ++i) {
      auto context = std::make_unique<grpc::ClientContext>();
      context->AddMetadata("authorization", "Bearer " + (*server)->cluster_token());
      v1::ReadChunkRequest request;
      request.mutable_key()->set_dataset_version(info.version());
      request.mutable_key()->set_file_id(file_id);
      readers.push_back(
          stalled_stubs.back()->AsyncReadChunk(context.get(), request, &queue, context.get()));
      contexts.push_back(std::move(context));
    }
  }
  std::this_thread::sleep_for(std::chrono::seconds(5));
  Sample stalled = Measure(pid, stub.get(), calls);
  Print("100 stalled ReadChunk streams", stalled, idle);
  for (auto& context : contexts) context->TryCancel();
  queue.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (queue.Next(&tag, &ok)) {
  }
  return 0;
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  int calls = 200;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--calls=", 0) == 0) calls = std::stoi(arg.substr(8));
  }
  return granary::Run(calls);
}
