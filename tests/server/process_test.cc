// granaryd as a process: flags and config file errors, the data-directory
// lock, clean shutdown on SIGTERM (and a prompt exit on it while starting),
// and the Unix socket's permissions.
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <optional>
#include <thread>

#include "common/base/file_util.h"
#include "grpcpp/client_context.h"
#include "tests/server/server_test_util.h"
#include "tests/support/child_process.h"
#include "tests/support/granaryd_process.h"
#include "tests/support/silent_listener.h"

namespace granary::testing {
namespace {

// Runs granaryd with a config file holding `yaml` and expects it to exit with
// status 2 and a one-line reason containing `named`.
void ExpectConfigRejected(const std::string& yaml, const std::string& named) {
  TempDir dir;
  std::string path = dir.path() + "/granaryd.yaml";
  WriteSourceFile(dir.path(), "granaryd.yaml", yaml);
  auto run = RunGranaryd(
      {"--config", path, "--data-dir", dir.path() + "/data", "--socket", dir.path() + "/s.sock"});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 2) << run->stderr_text;
  EXPECT_NE(run->stderr_text.find(named), std::string::npos) << run->stderr_text;
  EXPECT_NE(run->stderr_text.find(path), std::string::npos) << run->stderr_text;
}

TEST(GranarydProcessTest, ConfigFileErrorsNameTheKeyAndValue) {
  ExpectConfigRejected("capacity: 12XB\n", "'capacity'");
  ExpectConfigRejected("socket_mode: 0999\n", "'socket_mode'");
  ExpectConfigRejected("capacity: 12XB\n", "12XB");
  ExpectConfigRejected("colour: blue\n", "unknown key 'colour'");
  ExpectConfigRejected("listen: nowhere\n", "'nowhere'");
  ExpectConfigRejected("cache_dirs: {a: b}\n", "'cache_dirs'");
  ExpectConfigRejected("prewarm_parallelism: 0\n", "'prewarm_parallelism'");
  ExpectConfigRejected("fill_parallelism: 257\n", "'fill_parallelism'");
  ExpectConfigRejected("manifest_memory_mib: 0\n", "'manifest_memory_mib'");
  ExpectConfigRejected("manifest_memory_mib: plenty\n", "'manifest_memory_mib'");
  ExpectConfigRejected("etcd_lease_ttl: 1\n", "'etcd_lease_ttl'");
  ExpectConfigRejected("advertise: here\n", "'here'");
  ExpectConfigRejected("max_unauthenticated_connections_per_host: 0\n",
                       "'max_unauthenticated_connections_per_host'");
  ExpectConfigRejected("max_unauthenticated_connections: many\n",
                       "'max_unauthenticated_connections'");
  ExpectConfigRejected("data_dir: [unclosed\n", "line ");
  ExpectConfigRejected("- just\n- a list\n", "mapping");
}

TEST(GranarydProcessTest, BadFlagsAndMissingConfigAreRefused) {
  auto missing = RunGranaryd({"--config", "/no/such/granaryd.yaml"});
  ASSERT_TRUE(missing.ok());
  EXPECT_NE(missing->exit_code, 0);
  EXPECT_NE(missing->stderr_text.find("/no/such/granaryd.yaml"), std::string::npos);
  auto bad_size = RunGranaryd({"--capacity", "lots"});
  ASSERT_TRUE(bad_size.ok());
  EXPECT_EQ(bad_size->exit_code, 2);
  EXPECT_NE(bad_size->stderr_text.find("--capacity"), std::string::npos) << bad_size->stderr_text;
  auto unknown = RunGranaryd({"--frobnicate"});
  ASSERT_TRUE(unknown.ok());
  EXPECT_NE(unknown->exit_code, 0);
  EXPECT_NE(unknown->stderr_text.find("frobnicate"), std::string::npos);
}

TEST(GranarydProcessTest, MembersFileThatIsMissingOrOmitsThisNodeIsRefused) {
  TempDir dir;
  std::vector<std::string> base = {"--data-dir",       dir.path() + "/data",
                                   "--socket",         dir.path() + "/g.sock",
                                   "--listen",         "127.0.0.1:0",
                                   "--metrics-listen", "127.0.0.1:0",
                                   "--node-id",        "n1",
                                   "--insecure-tcp"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), base.begin(), base.end());
    return RunGranaryd(extra);
  };
  auto missing = with({"--members", dir.path() + "/nowhere.yaml"});
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->exit_code, 1);
  EXPECT_NE(missing->stderr_text.find("nowhere.yaml"), std::string::npos) << missing->stderr_text;

  std::string members = dir.path() + "/members.yaml";
  WriteSourceFile(dir.path(), "members.yaml", "members:\n  - id: n2\n    address: 127.0.0.1:1\n");
  auto unlisted = with({"--members", members});
  ASSERT_TRUE(unlisted.ok());
  EXPECT_EQ(unlisted->exit_code, 1);
  EXPECT_NE(unlisted->stderr_text.find("node 'n1' is not listed"), std::string::npos)
      << unlisted->stderr_text;

  WriteSourceFile(dir.path(), "etcd.yaml", "etcd: 127.0.0.1:1\n");
  auto both = with({"--config", dir.path() + "/etcd.yaml", "--members", members});
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->exit_code, 2);
  EXPECT_NE(both->stderr_text.find("comes from one"), std::string::npos) << both->stderr_text;
}

TEST(GranarydProcessTest, SecondInstanceOnTheSameDataDirIsRefused) {
  auto first = GranarydProcess::Start();
  ASSERT_TRUE(first.ok()) << first.status();
  TempDir other;
  auto second =
      RunGranaryd({"--data-dir", (*first)->data_dir(), "--socket", other.path() + "/s.sock",
                   "--metrics-listen", "127.0.0.1:" + std::to_string(FreeTcpPort())});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->exit_code, 1);
  EXPECT_NE(second->stderr_text.find("another granaryd (pid " + std::to_string((*first)->pid())),
            std::string::npos)
      << second->stderr_text;
  EXPECT_NE(second->stderr_text.find((*first)->data_dir()), std::string::npos);
  // The first one is unaffected.
  EXPECT_TRUE((*first)->MetricsText().ok());
}

TEST(GranarydProcessTest, TcpPortInUseIsRefused) {
  auto first = GranarydProcess::Start();
  ASSERT_TRUE(first.ok()) << first.status();
  TempDir other;
  auto second =
      RunGranaryd({"--data-dir", other.path() + "/data", "--socket", other.path() + "/s.sock",
                   "--listen", (*first)->tcp_address(), "--metrics-listen",
                   "127.0.0.1:" + std::to_string(FreeTcpPort()), "--insecure-tcp"});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->exit_code, 1);
  EXPECT_NE(second->stderr_text.find("cannot listen on " + (*first)->tcp_address()),
            std::string::npos)
      << second->stderr_text;
}

TEST(GranarydProcessTest, SigtermShutsDownCleanly) {
  auto server = GranarydProcess::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  auto status = (*server)->Terminate();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), 0) << (*server)->log();
  EXPECT_FALSE(std::filesystem::exists((*server)->socket_path()));
  EXPECT_NE((*server)->log().find("shutting down"), std::string::npos);
  // The lock went with it: the data directory is usable again at once.
  absl::Status restarted = (*server)->Restart();
  ASSERT_TRUE(restarted.ok()) << restarted;
}

// A stop signal while granaryd is still starting ends it at once rather than
// when startup ends. Startup is held in the catalog's first exchange by a
// peer that accepts connections and never answers.
TEST(GranarydProcessTest, SigtermWhileStartingEndsTheProcess) {
  const int silent_port = FreeTcpPort();
  SilentListener silent(silent_port);
  ASSERT_TRUE(silent.listening());

  TempDir dir;
  const std::string self = "127.0.0.1:" + std::to_string(FreeTcpPort());
  WriteSourceFile(dir.path(), "members.yaml",
                  "members:\n  - id: n1\n    address: " + self + "\n  - id: silent\n    address: " +
                      "127.0.0.1:" + std::to_string(silent_port) + "\n");
  const std::string log_path = dir.path() + "/stderr";
  auto pid = SpawnChild(GranarydPath(),
                        {"--data-dir", dir.path() + "/data", "--socket", dir.path() + "/g.sock",
                         "--listen", self, "--metrics-listen", "127.0.0.1:0", "--node-id", "n1",
                         "--members", dir.path() + "/members.yaml", "--insecure-tcp"},
                        log_path);
  ASSERT_TRUE(pid.ok()) << pid.status();
  std::string log;
  for (int attempt = 0; attempt < 200 && log.find("chunk store:") == std::string::npos; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    log = granary::ReadFileToString(log_path, "log").value_or("");
  }
  ASSERT_EQ(kill(*pid, SIGTERM), 0);
  std::optional<int> status = WaitForExit(*pid, std::chrono::seconds(10));
  if (!status.has_value()) KillChild(*pid);
  log = granary::ReadFileToString(log_path, "log").value_or("");
  ASSERT_TRUE(status.has_value()) << "granaryd ignored SIGTERM while starting:\n" << log;
  ASSERT_TRUE(WIFEXITED(*status)) << log;
  EXPECT_EQ(WEXITSTATUS(*status), 128 + SIGTERM) << log;
  EXPECT_NE(log.find("received SIGTERM while starting; exiting"), std::string::npos) << log;
}

TEST(GranarydProcessTest, ConfigFileSetsTheServer) {
  TempDir dir;
  int port = FreeTcpPort();
  WriteSourceFile(dir.path(), "granaryd.yaml",
                  "data_dir: " + dir.path() + "/data\nsocket: " + dir.path() +
                      "/s.sock\nlisten: 127.0.0.1:" + std::to_string(FreeTcpPort()) +
                      "\nmetrics_listen: 127.0.0.1:" + std::to_string(port) +
                      "\ncapacity: 256MiB\nnode_id: node-a\ngroup: rack-1\ncache_dirs: [" +
                      dir.path() + "/nvme0, " + dir.path() + "/nvme1]\n");
  // Flags override the file, so GranarydProcess's data dir, socket and
  // addresses win; the file's other values take effect.
  GranarydOptions options;
  options.extra_args = {"--config", dir.path() + "/granaryd.yaml"};
  auto server = GranarydProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  std::unique_ptr<v1::Granary::Stub> stub = (*server)->SocketStub();
  grpc::ClientContext context;
  v1::StatusResponse status;
  ASSERT_TRUE(stub->Status(&context, v1::StatusRequest(), &status).ok());
  ASSERT_EQ(status.nodes_size(), 1);
  EXPECT_EQ(status.nodes(0).node_id(), "node-a");
  EXPECT_EQ(status.nodes(0).group(), "rack-1");
  EXPECT_EQ(status.nodes(0).capacity_bytes(), 256u << 20);
  EXPECT_EQ(status.nodes(0).state(), "up");
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/nvme0"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/nvme1"));
  EXPECT_EQ(*(*server)->Metric("granary_store_capacity_bytes"), 256u << 20);
}

// 0 if user `uid` with group `gid` (and no other) can connect to the Unix
// socket at `path`, else the errno of the refusal. Runs in a child process, so
// the test's own credentials stay root.
int ConnectAs(uid_t uid, gid_t gid, const std::string& path) {
  pid_t child = ::fork();
  if (child == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) ::_exit(255);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    path.copy(address.sun_path, sizeof(address.sun_path) - 1);
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    int connected = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    ::_exit(connected == 0 ? 0 : errno);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(GranarydProcessTest, TheUnixSocketAdmitsItsOwnerAndItsGroupOnly) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to connect as other users";
  constexpr uid_t kNobody = 65534;
  // getgrnam answers in one static buffer: copy each id before the next call.
  group* found = ::getgrnam("daemon");
  ASSERT_NE(found, nullptr);
  const gid_t daemon_gid = found->gr_gid;
  found = ::getgrnam("nogroup");
  ASSERT_NE(found, nullptr);
  const gid_t other_gid = found->gr_gid;
  TempDir dir;
  WriteSourceFile(dir.path(), "granaryd.yaml", "socket_mode: 0660\nsocket_group: daemon\n");
  GranarydOptions options;
  options.extra_args = {"--config", dir.path() + "/granaryd.yaml"};
  auto server = GranarydProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string& socket = (*server)->socket_path();
  // Other users must be able to reach the socket for its own mode to decide.
  for (std::filesystem::path parent = std::filesystem::path(socket).parent_path();
       parent != parent.root_path(); parent = parent.parent_path()) {
    std::filesystem::permissions(parent, std::filesystem::perms::others_exec,
                                 std::filesystem::perm_options::add);
  }

  struct stat info {};
  ASSERT_EQ(::stat(socket.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0660u);
  EXPECT_EQ(info.st_gid, daemon_gid);
  EXPECT_EQ(ConnectAs(kNobody, daemon_gid, socket), 0);
  EXPECT_EQ(ConnectAs(kNobody, other_gid, socket), EACCES);
}

TEST(GranarydProcessTest, AnUnknownSocketGroupIsRefusedByName) {
  TempDir dir;
  WriteSourceFile(dir.path(), "granaryd.yaml", "socket_group: no-such-group\n");
  auto run = RunGranaryd({"--config", dir.path() + "/granaryd.yaml", "--data-dir",
                          dir.path() + "/data", "--socket", dir.path() + "/s.sock"});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_NE(run->exit_code, 0);
  EXPECT_NE(run->stderr_text.find("socket_group 'no-such-group'"), std::string::npos)
      << run->stderr_text;
}

}  // namespace
}  // namespace granary::testing
