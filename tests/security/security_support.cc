#include "tests/security/security_support.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/base/status.h"
#include "common/net/server_address.h"
#include "gtest/gtest.h"
#include "tests/support/child_process.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

absl::StatusOr<CommandResult> Run(const std::vector<std::string>& argv,
                                  std::chrono::milliseconds timeout) {
  if (argv.empty()) return absl::InvalidArgumentError("no command to run");
  TempDir temp;
  const std::string out_path = temp.path() + "/stdout", err_path = temp.path() + "/stderr";
  pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    int in = ::open("/dev/null", O_RDONLY);
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (in < 0 || out < 0 || err < 0) ::_exit(126);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  std::optional<int> status = WaitForExit(pid, timeout);
  if (!status) KillChild(pid);
  CommandResult result;
  if (status && WIFEXITED(*status)) result.exit_code = WEXITSTATUS(*status);
  result.stdout_text = ReadAll(out_path);
  result.stderr_text = ReadAll(err_path);
  return result;
}

absl::StatusOr<gid_t> EnsureGroup(const std::string& name) {
  if (group* found = ::getgrnam(name.c_str()); found != nullptr) return found->gr_gid;
  absl::StatusOr<CommandResult> made = Run({"/usr/sbin/groupadd", "--system", name});
  if (!made.ok()) return made.status();
  if (group* found = ::getgrnam(name.c_str()); found != nullptr) return found->gr_gid;
  return absl::InternalError(absl::StrCat("groupadd ", name, " failed: ", made->stderr_text));
}

void SharedNodeTest::SetUpSharedNode(const std::string& bob, const std::string& readers,
                                     const std::string& admins) {
  if (::geteuid() != 0) GTEST_SKIP() << "creating users needs root";
  absl::StatusOr<TestUser> user = EnsureTestUser(bob, {readers});
  ASSERT_TRUE(user.ok()) << user.status();
  bob_ = *user;
  absl::StatusOr<gid_t> readers_gid = EnsureGroup(readers);
  ASSERT_TRUE(readers_gid.ok()) << readers_gid.status();
  readers_gid_ = *readers_gid;
  ASSERT_TRUE(EnsureGroup(admins).ok());
  ASSERT_EQ(::chmod(roots_.path().c_str(), 0755), 0);
  source_ = roots_.path() + "/ds";
}

void SharedNodeTest::StartNodeWithDataset(const std::string& config) {
  absl::StatusOr<std::unique_ptr<GranarydProcess>> server =
      StartSharedGranaryd(roots_.path(), config_dir_.path(), config);
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = *std::move(server);
  ASSERT_EQ(
      CliAs(*server_, nullptr, {"dataset", "add", "ds", source_, "--chunk-size", "1MiB"}).exit_code,
      0);
}

absl::StatusOr<TestUser> EnsureTestUser(const std::string& name,
                                        const std::vector<std::string>& groups) {
  if (::getpwnam(name.c_str()) == nullptr) {
    absl::StatusOr<CommandResult> made = Run({"/usr/sbin/useradd", "--system", "--no-create-home",
                                              "--shell", "/usr/sbin/nologin", name});
    if (!made.ok()) return made.status();
    if (::getpwnam(name.c_str()) == nullptr) {
      return absl::InternalError(absl::StrCat("useradd ", name, " failed: ", made->stderr_text));
    }
  }
  for (const std::string& group_name : groups) {
    absl::StatusOr<gid_t> gid = EnsureGroup(group_name);
    if (!gid.ok()) return gid.status();
    absl::StatusOr<CommandResult> added =
        Run({"/usr/sbin/usermod", "--append", "--groups", group_name, name});
    if (!added.ok()) return added.status();
    if (added->exit_code != 0) {
      return absl::InternalError(
          absl::StrCat("usermod -aG ", group_name, " ", name, ": ", added->stderr_text));
    }
  }
  passwd* entry = ::getpwnam(name.c_str());
  return TestUser{name, entry->pw_uid, entry->pw_gid};
}

absl::StatusOr<CommandResult> RunAs(const TestUser& user, const std::vector<std::string>& argv,
                                    std::chrono::milliseconds timeout) {
  std::vector<std::string> command = {"/usr/bin/setpriv",
                                      absl::StrCat("--reuid=", user.uid),
                                      absl::StrCat("--regid=", user.gid),
                                      "--init-groups",
                                      "--reset-env",
                                      "--"};
  command.insert(command.end(), argv.begin(), argv.end());
  return Run(command, timeout);
}

void AsUserOnThread(const TestUser& user, const std::vector<gid_t>& groups,
                    const std::function<void()>& body) {
  std::thread thread([&] {
    ASSERT_EQ(::syscall(SYS_setgroups, groups.size(), groups.data()), 0);
    ASSERT_EQ(::syscall(SYS_setresgid, user.gid, user.gid, user.gid), 0);
    ASSERT_EQ(::syscall(SYS_setresuid, user.uid, user.uid, user.uid), 0);
    body();
  });
  thread.join();
}

int ConnectUnix(const std::string& path, int type) {
  absl::StatusOr<sockaddr_un> address = UnixSocketAddress(path);
  int fd = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  if (!address.ok() || fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&*address), sizeof(*address)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

absl::StatusOr<std::unique_ptr<GranarydProcess>> StartSharedGranaryd(const std::string& source_root,
                                                                     const std::string& config_dir,
                                                                     const std::string& config) {
  const std::string config_file = config_dir + "/granaryd.yaml";
  if (!(std::ofstream(config_file) << config)) {
    return absl::InternalError(absl::StrCat("cannot write ", config_file));
  }
  GranarydOptions options;
  options.source_roots = {source_root};
  options.extra_args = {"--config", config_file};
  absl::StatusOr<std::unique_ptr<GranarydProcess>> server = GranarydProcess::Start(options);
  if (!server.ok()) return server.status();
  const std::string socket_dir = std::filesystem::path((*server)->socket_path()).parent_path();
  if (::chmod(socket_dir.c_str(), 0711) != 0) {
    return absl::InternalError(absl::StrCat("cannot open ", socket_dir, " to search"));
  }
  return server;
}

CommandResult CliAs(const GranarydProcess& server, const TestUser* user,
                    std::vector<std::string> args) {
  args.insert(args.begin(), {CliPath(), "--server", server.socket_address()});
  absl::StatusOr<CommandResult> ran = user == nullptr ? Run(args) : RunAs(*user, args);
  EXPECT_TRUE(ran.ok()) << ran.status();
  return ran.ok() ? *ran : CommandResult{};
}

std::string CliPath() { return GRANARY_TEST_CLI_PATH; }
std::string FusePath() { return GRANARY_TEST_FUSE_PATH; }

void ReportAttack(const AttackRow& row) {
  auto cell = [](const std::string& text) {
    return absl::StrReplaceAll(text, {{"|", "\\|"}, {"\n", " "}});
  };
  std::string line =
      absl::StrCat("| ", cell(row.finding), " | ", cell(row.attack), " | ", cell(row.channel),
                   " | ", cell(row.expected), " | ", cell(row.observed), " |");
  std::cout << "attack table row: " << line << std::endl;
  if (const char* table = std::getenv("GRANARY_SECURITY_TABLE"); table != nullptr) {
    std::ofstream(table, std::ios::app) << line << "\n";
  }
}

}  // namespace granary::testing
