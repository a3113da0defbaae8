#include "tests/support/granaryd_process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/base/absl_compat.h"
#include "common/base/file_util.h"
#include "common/base/status.h"
#include "common/net/http.h"
#include "common/net/server_address.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "tests/support/child_process.h"

namespace granary::testing {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

std::string GranarydPath() { return GRANARY_TEST_GRANARYD_PATH; }

std::string TempDirBase() {
  const char* base = std::getenv("TMPDIR");
  return base != nullptr && base[0] != '\0' ? base : "/tmp";
}

TempDir::TempDir() {
  std::string pattern = absl::StrCat(TempDirBase(), "/granary-test-XXXXXX");
  char* made = ::mkdtemp(pattern.data());
  if (made == nullptr) std::abort();
  path_ = made;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

bool TcpPortAcceptsConnections(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  bool connected = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return connected;
}

int FreeTcpPort() {
  // Below the kernel's ephemeral range, which outgoing connections (gRPC's
  // among them) draw from: a port chosen there and closed could be taken by
  // one before the server that was given it binds it.
  int ephemeral_low = 32768;
  if (std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range"); range) {
    range >> ephemeral_low;
  }
  const int low = 10000;
  const int high = std::max(low + 1000, ephemeral_low);
  thread_local std::mt19937 random(std::random_device{}());
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int port = std::uniform_int_distribution<int>(low, high - 1)(random);
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) std::abort();
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    ::close(fd);
    if (bound) return port;
  }
  std::abort();
}

absl::StatusOr<std::string> WriteRandomClusterToken(const std::string& path) {
  std::ifstream random("/dev/urandom", std::ios::binary);
  unsigned char bytes[32];
  if (!random.read(reinterpret_cast<char*>(bytes), sizeof(bytes))) {
    return absl::InternalError("cannot read /dev/urandom");
  }
  std::string token;
  for (unsigned char byte : bytes) absl::StrAppend(&token, absl::Hex(byte, absl::kZeroPad2));
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot create ", path));
  std::string line = token + "\n";
  bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!written) return absl::InternalError(absl::StrCat("cannot write ", path));
  return token;
}

GranarydProcess::GranarydProcess(GranarydOptions options)
    : options_(std::move(options)),
      data_dir_(temp_.path() + "/data"),
      socket_path_(temp_.path() + "/granaryd.sock"),
      log_path_(temp_.path() + "/granaryd.log"),
      tcp_port_(options_.tcp_port != 0 ? options_.tcp_port : FreeTcpPort()),
      metrics_port_(FreeTcpPort()) {}

absl::StatusOr<std::unique_ptr<GranarydProcess>> GranarydProcess::Start(GranarydOptions options) {
  std::unique_ptr<GranarydProcess> process(new GranarydProcess(std::move(options)));
  // A --token-file in extra_args names the token file instead.
  const std::vector<std::string>& extra = process->options_.extra_args;
  auto named = std::find(extra.begin(), extra.end(), "--token-file");
  const bool named_in_args = named != extra.end() && std::next(named) != extra.end();
  if (named_in_args) process->options_.cluster_token_file = *std::next(named);
  if (process->options_.with_cluster_token) {
    process->cluster_token_file_ = process->options_.cluster_token_file;
    if (process->cluster_token_file_.empty()) {
      process->cluster_token_file_ = process->temp_.path() + "/token";
      GRANARY_RETURN_IF_ERROR(WriteRandomClusterToken(process->cluster_token_file_).status());
    }
    GRANARY_ASSIGN_OR_RETURN(process->cluster_token_,
                             ReadFileToString(process->cluster_token_file_, "cluster token"));
    process->cluster_token_ = std::string(absl::StripAsciiWhitespace(process->cluster_token_));
  }
  GRANARY_RETURN_IF_ERROR(process->Spawn());
  return process;
}

GranarydProcess::~GranarydProcess() { Kill().IgnoreError(); }

std::string GranarydProcess::tcp_address() const {
  return absl::StrCat(options_.host, ":", tcp_port_);
}

std::string GranarydProcess::metrics_address() const {
  return absl::StrCat("127.0.0.1:", metrics_port_);
}

std::string GranarydProcess::log() const {
  return ReadFileToString(log_path_, "granaryd log").value_or("");
}

std::shared_ptr<grpc::Channel> GranarydProcess::SocketChannel() const {
  return *MakeChannel(socket_address());
}

std::shared_ptr<grpc::Channel> GranarydProcess::TcpChannel() const {
  return *MakeChannel(tcp_address(), cluster_token_);
}

std::unique_ptr<v1::Granary::Stub> GranarydProcess::SocketStub() const {
  return v1::Granary::NewStub(SocketChannel());
}

std::unique_ptr<v1::Granary::Stub> GranarydProcess::TcpStub() const {
  return v1::Granary::NewStub(TcpChannel());
}

absl::Status GranarydProcess::Spawn() {
  std::vector<std::string> args{"--data-dir", data_dir_,     "--socket",         socket_path_,
                                "--listen",   tcp_address(), "--metrics-listen", metrics_address()};
  for (const std::string& root : options_.source_roots) {
    args.insert(args.end(), {"--source-root", root});
  }
  const bool named_in_args = std::find(options_.extra_args.begin(), options_.extra_args.end(),
                                       "--token-file") != options_.extra_args.end();
  if (!cluster_token_file_.empty() && !named_in_args) {
    args.insert(args.end(), {"--token-file", cluster_token_file_});
  }
  args.insert(args.end(), {"--fill", options_.fill});
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  std::string binary = GranarydPath();
  if (!options_.user.empty()) {
    const passwd* user = ::getpwnam(options_.user.c_str());
    if (user == nullptr) return absl::NotFoundError(absl::StrCat("no user ", options_.user));
    for (const std::string& owned : {temp_.path(), cluster_token_file_}) {
      if (!owned.empty() && ::chown(owned.c_str(), user->pw_uid, user->pw_gid) != 0) {
        return ErrnoStatus(errno, absl::StrCat("chown ", owned, " to ", options_.user));
      }
    }
    args.insert(args.begin(),
                {absl::StrCat("--reuid=", user->pw_uid), absl::StrCat("--regid=", user->pw_gid),
                 "--clear-groups", "--", binary});
    binary = "/usr/bin/setpriv";
  }
  if (!options_.command_prefix.empty()) {
    args.insert(args.begin(), binary);
    args.insert(args.begin(), options_.command_prefix.begin() + 1, options_.command_prefix.end());
    binary = options_.command_prefix.front();
  }
  GRANARY_ASSIGN_OR_RETURN(pid_, SpawnChild(binary, args, log_path_));
  absl::Status serving = WaitUntilServing();
  if (!serving.ok()) Kill().IgnoreError();
  return serving;
}

namespace {

// Whether something accepts connections on the Unix socket at `path`.
bool SocketAccepts(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) return false;
  path.copy(address.sun_path, path.size());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool connected = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return connected;
}

}  // namespace

absl::Status GranarydProcess::WaitUntilServing() {
  // Polls the socket itself rather than gRPC: a gRPC channel that failed to
  // connect backs off for a second or more before trying again.
  auto deadline = Clock::now() + options_.startup_timeout;
  while (!SocketAccepts(socket_path_)) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::InternalError(
          absl::StrCat("granaryd exited during startup (wait status ", status, "):\n", log()));
    }
    if (Clock::now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("granaryd did not answer on ", socket_address(), " within ",
                       options_.startup_timeout.count(), " ms:\n", log()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Channels share subchannels: one may still hold the connection to a
  // previous run of this server and fail a call once with a broken pipe, so
  // Status is retried until the deadline.
  grpc::Status answered;
  do {
    grpc::ClientContext context;
    context.set_wait_for_ready(true);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
    v1::StatusRequest request;
    request.set_local_only(true);
    v1::StatusResponse response;
    answered = SocketStub()->Status(&context, request, &response);
  } while (!answered.ok() && Clock::now() < deadline);
  if (!answered.ok()) {
    return absl::UnavailableError(absl::StrCat("granaryd accepts connections on ", socket_address(),
                                               " but Status failed: ", answered.error_message(),
                                               "\n", log()));
  }
  return absl::OkStatus();
}

absl::Status GranarydProcess::Kill() {
  KillChild(pid_);
  pid_ = -1;
  return absl::OkStatus();
}

absl::StatusOr<int> GranarydProcess::Terminate(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return absl::FailedPreconditionError("granaryd is not running");
  ::kill(pid_, SIGTERM);
  std::optional<int> status = WaitForExit(pid_, timeout);
  if (!status.has_value()) {
    Kill().IgnoreError();
    return absl::DeadlineExceededError(
        absl::StrCat("granaryd did not exit within ", timeout.count(), " ms of SIGTERM"));
  }
  pid_ = -1;
  return *status;
}

absl::Status GranarydProcess::Restart() {
  GRANARY_RETURN_IF_ERROR(Kill());
  return Spawn();
}

absl::StatusOr<std::string> GranarydProcess::MetricsText() const {
  return HttpGet(metrics_address(), "/metrics");
}

absl::StatusOr<double> GranarydProcess::Metric(std::string_view sample) const {
  GRANARY_ASSIGN_OR_RETURN(std::string text, MetricsText());
  return ParseMetric(text, sample);
}

absl::Status GranarydProcess::WaitForWriteBehind(std::chrono::seconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    GRANARY_ASSIGN_OR_RETURN(double queued, Metric("granary_write_behind_bytes"));
    if (queued == 0) return absl::OkStatus();
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          queued, " bytes of chunks still waiting to be stored after ", timeout.count(), " s"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

absl::StatusOr<double> ParseMetric(std::string_view text, std::string_view sample) {
  for (absl::string_view line : absl::StrSplit(AsAbsl(text), '\n')) {
    if (line.empty() || line.front() == '#') continue;
    size_t space = line.rfind(' ');
    if (space == absl::string_view::npos || line.substr(0, space) != AsAbsl(sample)) continue;
    double value = 0;
    if (!absl::SimpleAtod(line.substr(space + 1), &value)) {
      return absl::InvalidArgumentError(absl::StrCat("metric line '", line, "' has no number"));
    }
    return value;
  }
  return absl::NotFoundError(absl::StrCat("no metric sample '", AsAbsl(sample), "'"));
}

absl::StatusOr<ExitedProcess> RunGranaryd(const std::vector<std::string>& args,
                                          std::chrono::milliseconds timeout) {
  return RunProgram(GranarydPath(), args, timeout);
}

absl::StatusOr<ExitedProcess> RunProgram(const std::string& binary,
                                         const std::vector<std::string>& args,
                                         std::chrono::milliseconds timeout) {
  TempDir temp;
  std::string log_path = temp.path() + "/stderr";
  GRANARY_ASSIGN_OR_RETURN(pid_t pid, SpawnChild(binary, args, log_path));
  std::optional<int> status = WaitForExit(pid, timeout);
  if (!status.has_value()) {
    KillChild(pid);
    return absl::DeadlineExceededError(
        absl::StrCat(binary, " ", absl::StrJoin(args, " "), " did not exit within ",
                     timeout.count(), " ms:\n", ReadFileToString(log_path, "log").value_or("")));
  }
  ExitedProcess result;
  result.exit_code = WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
  result.stderr_text = ReadFileToString(log_path, "log").value_or("");
  return result;
}

}  // namespace granary::testing
