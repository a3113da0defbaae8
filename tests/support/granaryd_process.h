// GranarydProcess runs a real `granaryd` as a child process for integration
// tests: a fresh temporary data directory, its own Unix socket, a free TCP port
// for peers and a free metrics port, and a fresh random cluster token (a 0600
// file) that its TCP channels carry. Start() returns once the server answers
// Status over its socket. The process can be killed (SIGKILL), stopped
// (SIGTERM) and restarted on the same data directory and addresses; its
// Prometheus metrics can be fetched and parsed.
//
// The temporary directory (data, socket, log) is removed by the destructor,
// which first SIGKILLs a process still running.
//
// RunGranaryd() runs the binary to completion with arbitrary arguments, for
// tests of flags, configuration errors and refusals.
//
// Thread-safety: not thread-safe; use one object from one test thread. The
// channels and stubs it hands out are thread-safe.
#ifndef GRANARY_TESTS_SUPPORT_GRANARYD_PROCESS_H_
#define GRANARY_TESTS_SUPPORT_GRANARYD_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/granary.grpc.pb.h"

namespace granary::testing {

// Absolute path of the granaryd binary this test was built with.
std::string GranarydPath();

// Where temporary directories go: $TMPDIR, or /tmp.
std::string TempDirBase();

// A fresh directory under TempDirBase(), removed with its content by the
// destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A TCP port on 127.0.0.1 that was free when asked, below the ephemeral
// range so that no outgoing connection takes it before its server binds it.
int FreeTcpPort();

// Whether a server accepts connections on 127.0.0.1:`port`.
bool TcpPortAcceptsConnections(int port);

// Writes a fresh random cluster token (256 bits, hexadecimal) to `path`
// with mode 0600 and returns it.
absl::StatusOr<std::string> WriteRandomClusterToken(const std::string& path);

struct GranarydOptions {
  // Appended after the flags GranarydProcess sets itself (--data-dir,
  // --socket, --listen, --metrics-listen, --token-file), so they may add to
  // or override them.
  std::vector<std::string> extra_args;
  // The directories datasets may be registered from (--source-root): by
  // default where every test makes its sources.
  std::vector<std::string> source_roots = {TempDirBase()};
  // The TCP (peer) port; 0: a free one. Clusters choose ports up front to
  // write them into the members file.
  int tcp_port = 0;
  // The TCP (peer) listener's host: loopback, or the address of a network
  // namespace the server runs in.
  std::string host = "127.0.0.1";
  // Words put before the command line, e.g. {"nsenter", "--net=...", "--"}
  // to run granaryd in another network namespace.
  std::vector<std::string> command_prefix = {};
  // How long Start()/Restart() wait for the server to answer.
  std::chrono::milliseconds startup_timeout{20000};
  // When set, granaryd runs as this user (through setpriv; the test must run
  // as root), and its temporary directory belongs to the user: for tests of
  // permissions, which root would bypass.
  std::string user = {};
  // The cluster token file; empty: a fresh one in the server's directory.
  // A --token-file in extra_args takes its place.
  std::string cluster_token_file = {};
  // false: no --token-file at all (the TCP listener then needs
  // --insecure-tcp in extra_args, or granaryd refuses to start).
  bool with_cluster_token = true;
  // The default fill policy (--fill). Tests count what each read fetches,
  // which a fill running behind the readers would change, so they run
  // without one unless they test fills.
  std::string fill = "none";
};

class GranarydProcess {
 public:
  static absl::StatusOr<std::unique_ptr<GranarydProcess>> Start(GranarydOptions options = {});
  ~GranarydProcess();
  GranarydProcess(const GranarydProcess&) = delete;
  GranarydProcess& operator=(const GranarydProcess&) = delete;

  const std::string& data_dir() const { return data_dir_; }
  const std::string& socket_path() const { return socket_path_; }
  // "unix:<socket path>", for the CLI's --server and MakeChannel().
  std::string socket_address() const { return "unix:" + socket_path_; }
  // "<host>:<port>": the TCP (peer) address.
  std::string tcp_address() const;
  // "127.0.0.1:<port>": the Prometheus endpoint (in the server's network
  // namespace).
  std::string metrics_address() const;
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  // Everything the server wrote to stderr so far (all runs).
  std::string log() const;

  // The token the TCP channels carry; empty without one.
  const std::string& cluster_token() const { return cluster_token_; }
  // The file holding it, for clients' --token-file; empty without one.
  const std::string& cluster_token_file() const { return cluster_token_file_; }
  // A channel and a stub over the Unix socket, and over TCP (with the token).
  std::shared_ptr<grpc::Channel> SocketChannel() const;
  std::shared_ptr<grpc::Channel> TcpChannel() const;
  std::unique_ptr<v1::Granary::Stub> SocketStub() const;
  std::unique_ptr<v1::Granary::Stub> TcpStub() const;

  // SIGKILL and reap. OK if the process was not running.
  absl::Status Kill();
  // SIGTERM and wait up to `timeout`; returns the raw wait status (use
  // WIFEXITED/WEXITSTATUS). DEADLINE_EXCEEDED (and a SIGKILL) on timeout.
  absl::StatusOr<int> Terminate(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // Starts the server again on the same data directory and addresses (after
  // Kill() or Terminate(); kills a running one first).
  absl::Status Restart();

  // The text of GET /metrics.
  absl::StatusOr<std::string> MetricsText() const;
  // The value of one sample, named exactly as it appears in the text, labels
  // included: "granary_source_reads_total" or
  // 'granary_read_latency_seconds_count'. NOT_FOUND if absent.
  absl::StatusOr<double> Metric(std::string_view sample) const;
  // Waits until the chunks fetched so far are stored (the write-behind queue
  // is empty): a read through answers before its chunk is stored.
  // DEADLINE_EXCEEDED after `timeout`.
  absl::Status WaitForWriteBehind(std::chrono::seconds timeout = std::chrono::seconds(30)) const;

 private:
  explicit GranarydProcess(GranarydOptions options);
  absl::Status Spawn();
  absl::Status WaitUntilServing();

  GranarydOptions options_;
  TempDir temp_;
  std::string data_dir_;
  std::string socket_path_;
  std::string log_path_;
  int tcp_port_ = 0;
  int metrics_port_ = 0;
  std::string cluster_token_file_;
  std::string cluster_token_;
  pid_t pid_ = -1;
};

// Runs granaryd with exactly `args` until it exits (SIGKILL after `timeout`).
struct ExitedProcess {
  int exit_code = -1;  // -1 if killed by a signal.
  std::string stderr_text;
};
absl::StatusOr<ExitedProcess> RunGranaryd(
    const std::vector<std::string>& args,
    std::chrono::milliseconds timeout = std::chrono::seconds(20));
// The same for any program: `binary` with exactly `args`.
absl::StatusOr<ExitedProcess> RunProgram(
    const std::string& binary, const std::vector<std::string>& args,
    std::chrono::milliseconds timeout = std::chrono::seconds(20));

// The value of `sample` in Prometheus text `text` (see GranarydProcess::Metric).
absl::StatusOr<double> ParseMetric(std::string_view text, std::string_view sample);

}  // namespace granary::testing

#endif  // GRANARY_TESTS_SUPPORT_GRANARYD_PROCESS_H_
