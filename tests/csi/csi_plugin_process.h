// CsiPluginProcess runs a real `granary-csi` child process for integration
// tests: its CSI socket in a fresh temporary directory, publishing datasets of
// the granary-fuse mount at `mount` and asking the granaryd at `server` for
// sizes. Start() returns once the socket answers GetPluginInfo; the stubs
// speak CSI v1 over that socket as a kubelet does. The destructor SIGKILLs a
// process still running.
//
// Thread-safety: not thread-safe; use one object from one test thread. The
// stubs it hands out are thread-safe.
#ifndef GRANARY_TESTS_CSI_CSI_PLUGIN_PROCESS_H_
#define GRANARY_TESTS_CSI_CSI_PLUGIN_PROCESS_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "csi/proto/csi.grpc.pb.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {

class CsiPluginProcess {
 public:
  // `extra_args` follow --endpoint, --mount and --server.
  static absl::StatusOr<std::unique_ptr<CsiPluginProcess>> Start(
      const std::string& mount, const std::string& server,
      const std::vector<std::string>& extra_args = {});
  ~CsiPluginProcess();
  CsiPluginProcess(const CsiPluginProcess&) = delete;
  CsiPluginProcess& operator=(const CsiPluginProcess&) = delete;

  const std::string& socket_path() const { return socket_path_; }
  pid_t pid() const { return pid_; }
  // Everything granary-csi wrote to stderr so far.
  std::string log() const;

  std::unique_ptr<csi::v1::Identity::Stub> Identity() const;
  std::unique_ptr<csi::v1::Node::Stub> Node() const;

  // SIGKILLs granary-csi, as a crash would, and starts it again with the same
  // arguments on the same socket.
  absl::Status Restart();

 private:
  CsiPluginProcess() = default;
  absl::Status Spawn();

  TempDir temp_;
  std::string socket_path_;
  std::string log_path_;
  std::vector<std::string> args_;
  pid_t pid_ = -1;
};

// What a kubelet sends to publish a PersistentVolume of volume id
// "granary-ds" with `attributes` as its volumeAttributes, read-only
// (ReadOnlyMany), at `target`.
csi::v1::NodePublishVolumeRequest ReadOnlyPublishRequest(
    const std::string& target, const std::map<std::string, std::string>& attributes);

// Absolute path of the granary-csi binary this test was built with.
std::string CsiPluginPath();

}  // namespace granary::testing

#endif  // GRANARY_TESTS_CSI_CSI_PLUGIN_PROCESS_H_
