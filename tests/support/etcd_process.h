// EtcdProcess runs a real single-member etcd (Debian's etcd-server, 3.4) on
// loopback for membership tests: a temporary data directory and free client and
// peer ports. Start() returns once etcd answers on its client port.
//
// Thread-safety: not thread-safe; one object per test.
#ifndef GRANARY_TESTS_SUPPORT_ETCD_PROCESS_H_
#define GRANARY_TESTS_SUPPORT_ETCD_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {

class EtcdProcess {
 public:
  // UNAVAILABLE if etcd is not installed or does not come up.
  static absl::StatusOr<std::unique_ptr<EtcdProcess>> Start();
  ~EtcdProcess();
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  // "http://127.0.0.1:<port>", for granaryd --etcd.
  std::string endpoint() const;
  std::string log() const;

 private:
  EtcdProcess() = default;

  TempDir temp_;
  int client_port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace granary::testing

#endif  // GRANARY_TESTS_SUPPORT_ETCD_PROCESS_H_
