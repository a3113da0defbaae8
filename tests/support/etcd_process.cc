#include "tests/support/etcd_process.h"

#include <unistd.h>

#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/file_util.h"
#include "common/net/server_address.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "proto/etcd.grpc.pb.h"
#include "tests/support/child_process.h"

namespace granary::testing {
namespace {

constexpr char kEtcdBinary[] = "/usr/bin/etcd";

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdProcess>> EtcdProcess::Start() {
  if (::access(kEtcdBinary, X_OK) != 0) {
    return absl::UnavailableError("etcd is not installed (Debian package etcd-server)");
  }
  std::unique_ptr<EtcdProcess> etcd(new EtcdProcess());
  etcd->client_port_ = FreeTcpPort();
  int peer_port = FreeTcpPort();
  std::string client_url = absl::StrCat("http://127.0.0.1:", etcd->client_port_);
  std::string peer_url = absl::StrCat("http://127.0.0.1:", peer_port);
  auto pid = SpawnChild(kEtcdBinary,
                        {"--name", "granary-test", "--data-dir", etcd->temp_.path() + "/etcd",
                         "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
                         "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                         "--initial-cluster", absl::StrCat("granary-test=", peer_url)},
                        etcd->temp_.path() + "/etcd.log");
  if (!pid.ok()) return pid.status();
  etcd->pid_ = *pid;

  // Wait for the port before the first RPC: a channel whose first connection
  // is refused backs off for seconds before it tries again.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!TcpPortAcceptsConnections(etcd->client_port_) &&
         std::chrono::steady_clock::now() < deadline) {
    if (WaitForExit(etcd->pid_, std::chrono::milliseconds(20)).has_value()) {
      etcd->pid_ = -1;
      return absl::UnavailableError(absl::StrCat("etcd exited at startup:\n", etcd->log()));
    }
  }
  auto channel = MakeChannel(absl::StrCat("127.0.0.1:", etcd->client_port_));
  if (!channel.ok()) return channel.status();
  auto kv = etcdserverpb::KV::NewStub(*channel);
  while (std::chrono::steady_clock::now() < deadline) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
    etcdserverpb::RangeRequest request;
    request.set_key("probe");
    etcdserverpb::RangeResponse response;
    if (kv->Range(&context, request, &response).ok()) return etcd;
    if (WaitForExit(etcd->pid_, std::chrono::milliseconds(0)).has_value()) {
      etcd->pid_ = -1;
      return absl::UnavailableError(absl::StrCat("etcd exited at startup:\n", etcd->log()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::UnavailableError(absl::StrCat("etcd did not answer within 60 s:\n", etcd->log()));
}

EtcdProcess::~EtcdProcess() { KillChild(pid_); }

std::string EtcdProcess::endpoint() const {
  return absl::StrCat("http://127.0.0.1:", client_port_);
}

std::string EtcdProcess::log() const {
  return ReadFileToString(temp_.path() + "/etcd.log", "etcd log").value_or("");
}

}  // namespace granary::testing
