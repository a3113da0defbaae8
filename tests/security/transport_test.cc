// Who is on the other end of a connection to granaryd, and what one client can
// hold: the TCP listener and its token, token files, socket modes, the local
// read socket's callers, and the limits that keep granaryd answering while
// clients hold connections and stall streams (findings 1, 5, 6 and 9 of the
// trust-boundary issue).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/dataset_client.h"
#include "client/peer_read_connections.h"
#include "common/base/file_util.h"
#include "common/net/local_read_socket.h"
#include "common/net/server_address.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "tests/security/security_support.h"
#include "tests/server/server_test_util.h"
#include "tests/support/child_process.h"
#include "tests/support/granaryd_process.h"

namespace granary {
namespace {

using testing::AsUserOnThread;
using testing::ConnectUnix;
using testing::GranarydProcess;
using testing::ReportAttack;
using testing::TempDir;
using testing::TestUser;

constexpr char kUser[] = "granary-transport";
constexpr char kSocketGroup[] = "granary-transport-sock";

int ConnectTcp(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int PortOf(const std::string& host_port) {
  return std::stoi(host_port.substr(host_port.rfind(':') + 1));
}

grpc::Status StatusCall(v1::Granary::Stub* stub) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::StatusRequest request;
  request.set_local_only(true);
  v1::StatusResponse response;
  return stub->Status(&context, request, &response);
}

// Resident memory of `pid` in bytes.
uint64_t ResidentBytes(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

std::string WriteToken(const TempDir& dir, const std::string& name, const std::string& token,
                       std::filesystem::perms mode) {
  std::string path = dir.path() + "/" + name;
  std::ofstream(path) << token << "\n";
  std::filesystem::permissions(path, mode);
  return path;
}

TEST(Transport, TheDefaultConfigurationHasNoTcpListener) {
  TempDir dir;
  // granaryd with only its private paths: no --listen, no cluster.
  auto server = testing::RunGranaryd(
      {"--data-dir", dir.path() + "/data", "--socket", dir.path() + "/g.sock", "--metrics-listen",
       absl::StrCat("127.0.0.1:", testing::FreeTcpPort()), "--capacity", "0"});
  ASSERT_TRUE(server.ok());
  // --capacity 0 is refused before anything listens.
  EXPECT_EQ(server->exit_code, 2);
  EXPECT_NE(server->stderr_text.find("a capacity of 0 leaves no room"), std::string::npos)
      << server->stderr_text;
  ReportAttack({"9", "granaryd --capacity 0", "command line",
                "refused at start, not 80% of the free space", server->stderr_text});

  // The harness always asks for a TCP listener, so this server is started
  // with its private paths alone.
  TempDir plain;
  std::string log_path = plain.path() + "/log";
  auto pid = testing::SpawnChild(
      testing::GranarydPath(),
      {"--data-dir", plain.path() + "/data", "--socket", plain.path() + "/g.sock",
       "--metrics-listen", absl::StrCat("127.0.0.1:", testing::FreeTcpPort())},
      log_path);
  ASSERT_TRUE(pid.ok()) << pid.status();
  auto stub = v1::Granary::NewStub(*MakeChannel("unix:" + plain.path() + "/g.sock"));
  grpc::Status answered;
  for (int i = 0; i < 100 && !(answered = StatusCall(stub.get())).ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(answered.ok()) << answered.error_message();
  std::string log = ReadFileToString(log_path, "log").value_or("");
  ::kill(*pid, SIGKILL);
  ::waitpid(*pid, nullptr, 0);
  EXPECT_NE(log.find("and no TCP listener"), std::string::npos) << log;
  ReportAttack({"1", "any local user calls granaryd on 127.0.0.1:7070 (default configuration)",
                "TCP", "no TCP listener at all",
                log.find("and no TCP listener") != std::string::npos
                    ? "granaryd logged: no TCP listener"
                    : log});
}

TEST(Transport, TcpCallsWithoutTheTokenAreUnauthenticated) {
  auto user = testing::EnsureTestUser(kUser);
  ASSERT_TRUE(user.ok()) << user.status();
  auto server = GranarydProcess::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  auto run = testing::RunAs(*user, {testing::CliPath(), "--server", (*server)->tcp_address(),
                                    "dataset", "add", "x", "/root"});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_NE(run->exit_code, 0);
  EXPECT_NE(run->stderr_text.find("requires the cluster token"), std::string::npos)
      << run->stderr_text;
  ReportAttack({"1", "user without the token: granary --server 127.0.0.1:PORT dataset add x /root",
                "TCP", "UNAUTHENTICATED", run->stderr_text});
  // The token file the server uses is its owner's alone.
  auto token = testing::RunAs(*user, {"/bin/cat", (*server)->data_dir() + "/../token"});
  ASSERT_TRUE(token.ok());
  EXPECT_NE(token->exit_code, 0);
}

TEST(Transport, PeerReadsWithoutTheTokenAreUnauthenticated) {
  auto user = testing::EnsureTestUser(kUser);
  ASSERT_TRUE(user.ok()) << user.status();
  auto server = GranarydProcess::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  // The user guesses a token and asks for a chunk of any version, over the
  // peer read protocol on the TCP port.
  PeerReadConnections::Result read;
  AsUserOnThread(*user, {user->gid}, [&] {
    PeerReadConnections reader((*server)->tcp_address(), "guessed-token", std::chrono::seconds(5));
    v1::ReadChunkRequest request;
    ChunkKey{1, 0, 0}.ToProto(request.mutable_key());
    request.set_length(16);
    std::string out(16, '\0');
    read = reader.Read(request, out);
  });
  ASSERT_EQ(read.outcome, PeerReadConnections::Outcome::kRead);
  EXPECT_EQ(read.status.code(), absl::StatusCode::kUnauthenticated) << read.status;
  EXPECT_NE(read.status.message().find("wrong cluster token"), absl::string_view::npos)
      << read.status;
  ReportAttack({"new", "user with a guessed token reads a chunk over the peer read protocol", "TCP",
                "UNAUTHENTICATED, connection closed", std::string(read.status.message())});
  // Members still read.
  auto member = DatasetClient::Connect((*server)->tcp_address(),
                                       {.cluster_token = (*server)->cluster_token()});
  ASSERT_TRUE(member.ok());
  EXPECT_TRUE((*member)->ListDatasets().ok());
}

TEST(Transport, WeakOrExposedTokenFilesAreRefusedAtStart) {
  TempDir dir;
  const std::string strong = "9f0c2b7e4d1a8c3f5e6b0a9d2c4e7f1b";
  struct Case {
    std::string what, file, rule;
  } cases[] = {
      {"a token file of mode 0644",
       WriteToken(dir, "open", strong,
                  std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                      std::filesystem::perms::group_read | std::filesystem::perms::others_read),
       "must not be readable by its group or others; run chmod 600"},
      {"the placeholder of deploy/kubernetes/secret.yaml",
       WriteToken(dir, "placeholder", "REPLACE-WITH-A-RANDOM-TOKEN-OF-32-CHARACTERS",
                  std::filesystem::perms::owner_read),
       "holds a placeholder"},
      {"16 identical letters",
       WriteToken(dir, "letters", "aaaaaaaaaaaaaaaa", std::filesystem::perms::owner_read),
       "1 distinct characters"},
      {"16 hexadecimal digits (64 bits)",
       WriteToken(dir, "short", "0123456789abcdef", std::filesystem::perms::owner_read),
       "at least 128 are required"},
  };
  for (const Case& tried : cases) {
    auto run = testing::RunGranaryd(
        {"--data-dir", dir.path() + "/data", "--socket", dir.path() + "/g.sock", "--listen",
         absl::StrCat("127.0.0.1:", testing::FreeTcpPort()), "--token-file", tried.file});
    ASSERT_TRUE(run.ok());
    EXPECT_EQ(run->exit_code, 2) << tried.what;
    EXPECT_NE(run->stderr_text.find(tried.file), std::string::npos) << run->stderr_text;
    EXPECT_NE(run->stderr_text.find(tried.rule), std::string::npos) << run->stderr_text;
    ReportAttack({"9", "granaryd --token-file with " + tried.what, "command line",
                  "refused at start naming the file and the rule", run->stderr_text});
  }
  auto tcp_without_token =
      testing::RunGranaryd({"--data-dir", dir.path() + "/data", "--socket", dir.path() + "/g.sock",
                            "--listen", absl::StrCat("127.0.0.1:", testing::FreeTcpPort())});
  ASSERT_TRUE(tcp_without_token.ok());
  EXPECT_EQ(tcp_without_token->exit_code, 2);
  EXPECT_NE(tcp_without_token->stderr_text.find("needs a cluster token"), std::string::npos)
      << tcp_without_token->stderr_text;
  ReportAttack({"1", "granaryd --listen without a token", "command line",
                "refused at start unless --insecure-tcp", tcp_without_token->stderr_text});
}

// A server whose sockets belong to group kSocketGroup, which the test user is
// in, with a dataset of one cached file.
class TransportServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto user = testing::EnsureTestUser(kUser, {kSocketGroup});
    ASSERT_TRUE(user.ok()) << user.status();
    user_ = *user;
    auto group = testing::EnsureGroup(kSocketGroup);
    ASSERT_TRUE(group.ok());
    socket_gid_ = *group;
    std::ofstream(config_.path() + "/transport.yaml")
        << "socket_group: " << kSocketGroup << "\nsocket_mode: 0660\n"
        << "max_connections_per_user: 64\nmax_connections_per_host: 64\n"
        // Short, for the stalled-stream test, yet long enough that the
        // setup's own 64 MiB read is not taken for a stall on a loaded
        // machine (2 s was, once, beside the soak test).
        << "stream_stall_seconds: 5\n";
    testing::WriteSourceFile(source_.path(), "big.bin", testing::PatternBytes(kFileBytes, 1));
    auto server =
        GranarydProcess::Start({.extra_args = {"--config", config_.path() + "/transport.yaml"}});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    // The user may pass through the server's private directory to its
    // sockets; who may connect is then the sockets' own mode and group.
    std::filesystem::permissions(
        std::filesystem::path(server_->socket_path()).parent_path(),
        std::filesystem::perms::others_exec | std::filesystem::perms::group_exec,
        std::filesystem::perm_options::add);
    stub_ = server_->SocketStub();
    v1::DatasetInfo info;
    grpc::Status added = testing::AddDataset(stub_.get(), "ds", source_.path(), kChunkBytes, &info);
    ASSERT_TRUE(added.ok()) << added.error_message();
    std::vector<v1::ManifestEntry> entries;
    ASSERT_TRUE(testing::GetManifest(stub_.get(), "ds", 0, &entries).ok());
    for (size_t i = 0; i < entries.size(); ++i) {
      if (entries[i].path() == "big.bin") key_ = ChunkKey{info.version(), i, 0};
    }
    testing::ReadResult read =
        testing::ReadChunk(stub_.get(), key_.dataset_version, key_.file_id, 0);
    ASSERT_TRUE(read.status.ok()) << read.status.error_message();
    absl::Status stored = server_->WaitForWriteBehind();
    ASSERT_TRUE(stored.ok()) << stored;
  }

  static constexpr uint32_t kChunkBytes = 64 << 20;
  static constexpr size_t kFileBytes = kChunkBytes;
  TempDir source_;
  TempDir config_;
  TestUser user_;
  gid_t socket_gid_ = 0;
  std::unique_ptr<GranarydProcess> server_;
  std::unique_ptr<v1::Granary::Stub> stub_;
  ChunkKey key_;
};

TEST_F(TransportServerTest, SocketsHaveTheirModeAndGroupFromTheStart) {
  for (const std::string& path :
       {server_->socket_path(), LocalReadSocketPath(server_->socket_path())}) {
    struct stat info {};
    ASSERT_EQ(::stat(path.c_str(), &info), 0) << path;
    EXPECT_EQ(info.st_mode & 0777, 0660u) << path;
    EXPECT_EQ(info.st_gid, socket_gid_) << path;
    ReportAttack({"9", "connect to " + path + " while its permissions are looser", "Unix socket",
                  "mode and group set before listen()",
                  absl::StrCat("mode 0", (info.st_mode >> 6) & 7, (info.st_mode >> 3) & 7,
                               info.st_mode & 7, " group ", info.st_gid, " right after start")});
  }
}

TEST_F(TransportServerTest, TheLocalReadSocketAnswersOnlyRootAndCountsAtMostAChunk) {
  absl::Status as_user;
  AsUserOnThread(user_, {socket_gid_}, [&] {
    LocalChunkReader reader(LocalReadSocketPath(server_->socket_path()));
    std::string out(4096, '\0');
    as_user = reader.Read(key_, 0, std::span<char>(out.data(), out.size()));
  });
  EXPECT_EQ(as_user.code(), absl::StatusCode::kPermissionDenied) << as_user;
  EXPECT_NE(as_user.message().find("answers only root and granaryd's own user"), std::string::npos);
  ReportAttack({"9", "a user in the socket's group asks the local read socket for a data file",
                "local read socket", "PERMISSION_DENIED (read over gRPC instead)",
                std::string(as_user.message())});

  // Nor an in-memory copy of a file read through for it.
  absl::Status copy_as_user;
  AsUserOnThread(user_, {socket_gid_}, [&] {
    LocalChunkReader reader(LocalReadSocketPath(server_->socket_path()));
    copy_as_user =
        reader.OpenWholeFile(key_, kFileBytes, kChunkBytes, WholeFileFetch::kReadThroughInMemory)
            .status();
  });
  EXPECT_EQ(copy_as_user.code(), absl::StatusCode::kPermissionDenied) << copy_as_user;
  ReportAttack({"9", "a user in the socket's group asks for an in-memory copy of a file",
                "local read socket", "PERMISSION_DENIED", std::string(copy_as_user.message())});

  // Nor the data files of files asked for ahead of their opens: nothing is
  // passed with the refusal.
  v1::LocalReadResponse ahead_answer;
  std::vector<UniqueFd> ahead_passed;
  AsUserOnThread(user_, {socket_gid_}, [&] {
    const int socket = ConnectUnix(LocalReadSocketPath(server_->socket_path()), SOCK_SEQPACKET);
    if (socket < 0) return;
    v1::LocalReadRequest request;
    key_.ToProto(request.mutable_key());
    request.mutable_whole_file()->set_size(kFileBytes);
    request.mutable_whole_file()->set_chunk_size(kChunkBytes);
    v1::AheadFile* ahead = request.mutable_whole_file()->add_ahead();
    ahead->set_file_id(key_.file_id);
    ahead->set_size(kFileBytes);
    if (SendLocalReadMessage(socket, request, {}).ok()) {
      ReceiveLocalReadMessage(socket, &ahead_answer, &ahead_passed).IgnoreError();
    }
    ::close(socket);
  });
  EXPECT_EQ(ahead_answer.code(), static_cast<int>(absl::StatusCode::kPermissionDenied))
      << ahead_answer.message();
  EXPECT_TRUE(ahead_passed.empty());
  ReportAttack({"9", "a user in the socket's group asks for files ahead of their opens",
                "local read socket", "PERMISSION_DENIED, no descriptor passed",
                ahead_answer.message()});

  double before = *server_->Metric("granary_bytes_from_cache_total");
  int fd = ConnectUnix(LocalReadSocketPath(server_->socket_path()), SOCK_SEQPACKET);
  ASSERT_GE(fd, 0);
  v1::LocalReadRequest request;
  key_.ToProto(request.mutable_key());
  request.set_read_bytes(uint64_t{1} << 59);
  ASSERT_TRUE(SendLocalReadMessage(fd, request, {}).ok());
  v1::LocalReadResponse response;
  std::vector<UniqueFd> data_file;
  ASSERT_TRUE(ReceiveLocalReadMessage(fd, &response, &data_file).ok());
  EXPECT_EQ(response.code(), 0) << response.message();
  ::close(fd);
  double counted = *server_->Metric("granary_bytes_from_cache_total") - before;
  EXPECT_EQ(counted, kChunkBytes);
  ReportAttack({"9", "root claims read_bytes = 2^59 on the local read socket", "local read socket",
                "counted up to the chunk's length",
                absl::StrCat("granary_bytes_from_cache_total grew by ", counted)});
}

TEST_F(TransportServerTest, HeldConnectionsDoNotStopGranarydAnswering) {
  constexpr int kHeld = 300;
  std::vector<int> held;
  // Idle TCP connections that never speak HTTP/2, from this host.
  for (int i = 0; i < kHeld; ++i) {
    int fd = ConnectTcp(PortOf(server_->tcp_address()));
    if (fd >= 0) held.push_back(fd);
  }
  // Idle Unix-socket connections of the test user, on both sockets.
  AsUserOnThread(user_, {socket_gid_}, [&] {
    for (int i = 0; i < kHeld; ++i) {
      int fd = ConnectUnix(server_->socket_path(), SOCK_STREAM);
      if (fd >= 0) held.push_back(fd);
      fd = ConnectUnix(LocalReadSocketPath(server_->socket_path()), SOCK_SEQPACKET);
      if (fd >= 0) held.push_back(fd);
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // What granaryd keeps of them is bounded by its caps: 64 TCP connections
  // from this host, 64 of the user on the gRPC socket, 256 on the local read
  // socket (LocalReadServer::kMaxConnections), and its own few dozen.
  const auto descriptors = std::distance(
      std::filesystem::directory_iterator(absl::StrCat("/proc/", server_->pid(), "/fd")), {});
  EXPECT_LT(descriptors, 64 + 64 + 256 + 100);
  grpc::Status during = StatusCall(server_->SocketStub().get());
  EXPECT_TRUE(during.ok()) << during.error_message();

  // The local read socket's accept loop meets EMFILE: granaryd's descriptor
  // limit is lowered below what it holds.
  rlimit saved{};
  ASSERT_EQ(::prlimit(server_->pid(), RLIMIT_NOFILE, nullptr, &saved), 0) << std::strerror(errno);
  rlimit low{64, saved.rlim_max};
  ASSERT_EQ(::prlimit(server_->pid(), RLIMIT_NOFILE, &low, nullptr), 0) << std::strerror(errno);
  for (int i = 0; i < 50; ++i) {
    int fd = ConnectUnix(LocalReadSocketPath(server_->socket_path()), SOCK_SEQPACKET);
    if (fd >= 0) held.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (int fd : held) ::close(fd);
  ASSERT_EQ(::prlimit(server_->pid(), RLIMIT_NOFILE, &saved, nullptr), 0) << std::strerror(errno);

  // Once they close, both listeners serve new connections.
  grpc::Status after;
  absl::Status local_after;
  std::string out(4096, '\0');
  for (int i = 0; i < 50; ++i) {
    after = StatusCall(server_->SocketStub().get());
    LocalChunkReader reader(LocalReadSocketPath(server_->socket_path()));
    local_after = reader.Read(key_, 0, std::span<char>(out.data(), out.size()));
    if (after.ok() && local_after.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(after.ok()) << after.error_message();
  EXPECT_TRUE(local_after.ok()) << local_after;
  ReportAttack(
      {"5",
       absl::StrCat("hold ", kHeld, " idle TCP and ", 2 * kHeld,
                    " Unix connections (caps 64 per host and user), then exhaust "
                    "granaryd's descriptors"),
       "TCP, Unix socket, local read socket",
       "authorised status answered during and after; local reads served after",
       absl::StrCat(held.size(), " held, granaryd kept ", descriptors,
                    " descriptors; status during: ", during.ok() ? "OK" : during.error_message(),
                    "; status after: ", after.ok() ? "OK" : after.error_message(),
                    "; local read after: ", local_after.ToString())});
}

TEST_F(TransportServerTest, StalledReadStreamsAreCancelledAndMemoryIsReleased) {
  constexpr int kStreams = 30;
  const uint64_t baseline = ResidentBytes(server_->pid());
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  arguments.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  arguments.SetMaxReceiveMessageSize(-1);
  auto channel = grpc::CreateCustomChannel(server_->tcp_address(),
                                           grpc::InsecureChannelCredentials(), arguments);
  auto stub = v1::Granary::NewStub(channel);
  grpc::CompletionQueue queue;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientAsyncReader<v1::ReadChunkResponse>>> readers;
  for (int i = 0; i < kStreams; ++i) {
    auto context = std::make_unique<grpc::ClientContext>();
    context->AddMetadata("authorization", "Bearer " + server_->cluster_token());
    v1::ReadChunkRequest request;
    key_.ToProto(request.mutable_key());
    readers.push_back(stub->AsyncReadChunk(context.get(), request, &queue, context.get()));
    contexts.push_back(std::move(context));
  }
  // Nobody reads. Their writers stall until the watchdog cancels them: after
  // the 5 s limit, and on a loaded machine later, so the wait is generous.
  auto cancelled_calls = [&] {
    const std::string log = server_->log();
    size_t cancelled = 0;
    for (size_t at = log.find("cancelled a call"); at != std::string::npos;
         at = log.find("cancelled a call", at + 1)) {
      ++cancelled;
    }
    return cancelled;
  };
  uint64_t peak = baseline;
  size_t cancelled = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(40);
  while ((cancelled = cancelled_calls()) < kStreams &&
         std::chrono::steady_clock::now() < deadline) {
    peak = std::max(peak, ResidentBytes(server_->pid()));
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  // The cancelled handlers release their pieces as they return.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  peak = std::max(peak, ResidentBytes(server_->pid()));
  const uint64_t after = ResidentBytes(server_->pid());
  EXPECT_EQ(cancelled, static_cast<size_t>(kStreams)) << server_->log();
  // A stalled stream holds one message's piece of its range, not the range
  // (64 MiB each, 1.9 GiB for the 30 of them, before pieces), and releases
  // it when cancelled.
  EXPECT_LT(peak, baseline + (uint64_t{256} << 20));
  EXPECT_LT(after, baseline + (uint64_t{256} << 20));
  grpc::Status during = StatusCall(stub_.get());
  EXPECT_TRUE(during.ok()) << during.error_message();
  for (auto& context : contexts) context->TryCancel();
  ReportAttack(
      {"6",
       absl::StrCat(kStreams, " ReadChunk streams of a 64 MiB chunk never read, one connection"),
       "TCP", "each stream holds one 1 MiB piece; cancelled after stream_stall_seconds",
       absl::StrCat(cancelled, " cancelled; RSS ", baseline >> 20, " MiB before, peak ", peak >> 20,
                    " MiB, ", after >> 20, " MiB after")});
  queue.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (queue.Next(&tag, &ok)) {
  }
}

}  // namespace
}  // namespace granary
