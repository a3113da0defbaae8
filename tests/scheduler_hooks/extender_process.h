// Test support for the scheduler hooks: a real granary-extender child
// process spoken to over HTTP; LocateCounter, a gRPC server that answers
// Locate by asking a real granaryd and counts the calls (granaryd itself
// counts none), so that tests see how many Locate calls the extender made;
// and AddDataset, which gives a real granaryd a dataset partly cached.
//
// Thread-safety: ExtenderProcess from one test thread; LocateCounter serves
// concurrently and calls() may be read from any thread.
#ifndef GRANARY_TESTS_SCHEDULER_HOOKS_EXTENDER_PROCESS_H_
#define GRANARY_TESTS_SCHEDULER_HOOKS_EXTENDER_PROCESS_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "proto/granary.grpc.pb.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {

// A running granary-extender (--server `server`, --listen a free port, then
// `extra_args`), SIGKILLed by the destructor if still running. The
// constructor returns once /healthz answers (a test failure otherwise).
class ExtenderProcess {
 public:
  explicit ExtenderProcess(const std::string& server, std::vector<std::string> extra_args = {});
  ~ExtenderProcess();
  ExtenderProcess(const ExtenderProcess&) = delete;
  ExtenderProcess& operator=(const ExtenderProcess&) = delete;

  std::string address() const;
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string log() const;
  // POSTs `body` to `path`; the HTTP status and body (-1 and the error when
  // no answer came).
  std::pair<int, std::string> Post(const std::string& path, const std::string& body) const;
  // POSTs `body` to `path`, expects 200 and JSON; the parsed reply.
  nlohmann::json PostJson(const std::string& path, const nlohmann::json& body) const;
  // SIGTERM; the exit code, or -1.
  int Terminate();

 private:
  TempDir temp_;
  std::string log_path_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// The granary-extender binary these tests were built with.
std::string ExtenderPath();

inline constexpr uint64_t kMiB = 1 << 20;

// Registers `name` over new files under `root`/`name` (file name, MiB) and
// prewarms the `prewarm` ones (test failures otherwise).
void AddDataset(GranarydProcess& server, const std::string& root, const std::string& name,
                const std::vector<std::pair<std::string, int>>& files,
                const std::vector<std::string>& prewarm);

class LocateCounter {
 public:
  // Serves on `socket_path`, asking `upstream` (a granaryd address,
  // "unix:PATH").
  static absl::StatusOr<std::unique_ptr<LocateCounter>> Start(const std::string& socket_path,
                                                              const std::string& upstream);
  ~LocateCounter();

  std::string address() const { return "unix:" + socket_path_; }
  // Locate calls answered so far.
  int64_t calls() const { return service_.calls.load(); }

 private:
  class Service final : public v1::Granary::Service {
   public:
    grpc::Status Locate(grpc::ServerContext* context, const v1::LocateRequest* request,
                        v1::LocateResponse* response) override;

    std::unique_ptr<v1::Granary::Stub> upstream;
    std::atomic<int64_t> calls{0};
  };

  LocateCounter() = default;

  std::string socket_path_;
  Service service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace granary::testing

#endif  // GRANARY_TESTS_SCHEDULER_HOOKS_EXTENDER_PROCESS_H_
