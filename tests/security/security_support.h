// Support for the security suite (tests/security/README.md): local users made
// for the tests (the suite runs as root and creates them with useradd),
// commands run as those users through setpriv, and the table of attacks, one
// row per attack tried: what was tried, over which channel, the refusal
// expected and the one observed.
//
// Thread-safety: call from one test thread.
#ifndef GRANARY_TESTS_SECURITY_SECURITY_SUPPORT_H_
#define GRANARY_TESTS_SECURITY_SECURITY_SUPPORT_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {

struct TestUser {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
};

// The local user `name`, created (a system user without a home) if it does
// not exist yet, and made a member of each of `groups` (created as needed).
// Needs root.
absl::StatusOr<TestUser> EnsureTestUser(const std::string& name,
                                        const std::vector<std::string>& groups = {});

// The group id of `name`, creating the group if it does not exist.
absl::StatusOr<gid_t> EnsureGroup(const std::string& name);

// A fixture of a node its users share: bob, a reader (a member of the
// node's socket group), the source root (searchable by everyone) with the
// dataset's directory `source_` ("ds") in it, and the node's granaryd once
// a test starts it.
class SharedNodeTest : public ::testing::Test {
 protected:
  // Creates bob as the user `bob` in the group `readers` (the node's
  // socket_group) and the group `admins` (its admin_group), and prepares the
  // source root. Skips the test when not root: check IsSkipped() after it.
  void SetUpSharedNode(const std::string& bob, const std::string& readers,
                       const std::string& admins);
  // Starts the node's granaryd with `config` and registers `source_` as
  // "ds" in chunks of 1 MiB.
  void StartNodeWithDataset(const std::string& config);

  TempDir roots_;
  TempDir config_dir_;
  std::string source_;
  TestUser bob_;
  gid_t readers_gid_ = 0;
  std::unique_ptr<GranarydProcess> server_;
};

struct CommandResult {
  int exit_code = -1;  // -1: killed by a signal or by the timeout.
  std::string stdout_text;
  std::string stderr_text;
};

// Runs `argv` as `user` (real and effective ids, and the user's groups) to
// completion, SIGKILLed after `timeout`.
absl::StatusOr<CommandResult> RunAs(const TestUser& user, const std::vector<std::string>& argv,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(30));
// The same as whoever runs the test (root).
absl::StatusOr<CommandResult> Run(const std::vector<std::string>& argv,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(30));

// A granaryd run by root as on a node its users share: `config` (YAML lines,
// its socket_group and admin_group among them) in a file of its own under
// `config_dir`, datasets registered from `source_root` alone, and the
// directory of its socket searchable by everyone, so that the socket's own
// mode and group decide who connects.
absl::StatusOr<std::unique_ptr<GranarydProcess>> StartSharedGranaryd(const std::string& source_root,
                                                                     const std::string& config_dir,
                                                                     const std::string& config);

// `granary --server unix:SOCKET args...` against `server` as `user` (root
// when null). A command that could not be run at all fails the test and
// gives an empty result.
CommandResult CliAs(const GranarydProcess& server, const TestUser* user,
                    std::vector<std::string> args);

// Runs `body` on a thread of its own whose credentials alone are `user`'s,
// with supplementary groups `groups` (raw system calls: glibc's setuid would
// change every thread), so that a socket it connects carries `user` in
// SO_PEERCRED and the files it opens are checked as `user`'s; returns when
// `body` does. Descriptors it opens stay open for the process.
void AsUserOnThread(const TestUser& user, const std::vector<gid_t>& groups,
                    const std::function<void()>& body);

// A connected socket of `type` (SOCK_STREAM, SOCK_SEQPACKET) to the Unix
// socket `path`, or -1.
int ConnectUnix(const std::string& path, int type);

// The granary CLI this suite was built with.
std::string CliPath();
// The granary-fuse binary this suite was built with.
std::string FusePath();

// One row of the table of attacks: printed, and appended to
// $GRANARY_SECURITY_TABLE when set.
struct AttackRow {
  std::string finding;   // "1", "4", or "new" for attacks beyond the list.
  std::string attack;    // What was tried, by whom.
  std::string channel;   // "Unix socket", "TCP", "mount", "local read socket", "HTTP", ...
  std::string expected;  // The refusal that should happen.
  std::string observed;  // What happened: the error as the attacker saw it.
};
void ReportAttack(const AttackRow& row);

}  // namespace granary::testing

#endif  // GRANARY_TESTS_SECURITY_SECURITY_SUPPORT_H_
