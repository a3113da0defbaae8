// StreamWatchdog cancels a call whose client stopped taking its replies.
// gRPC's synchronous Write() blocks while the client's HTTP/2 window is
// closed, and the handler keeps its thread and what it is sending until then
// (ReadChunk holds the chunk's bytes, GetManifest its manifest): a client that
// opens streams and never reads would pin them for as long as it stays
// connected (30 such ReadChunk streams held 2.1 GB).
//
// The watchdog is a gRPC server interceptor, so it covers every method
// without the handlers' help: it notes when each call starts sending a
// message and when the send completes, and a send still pending after
// `stall_limit` gets its call cancelled (ServerContext::TryCancel), which
// makes the blocked Write() return false and the handler release what it
// held. What stalled clients can pin is thus bounded by the calls that can
// run at once (the server's thread cap) for at most `stall_limit` each.
//
// Thread-safety: all methods may be called concurrently; gRPC owns the
// interceptors the factory makes.
#ifndef GRANARY_CACHE_SERVER_READ_PATH_STREAM_WATCHDOG_H_
#define GRANARY_CACHE_SERVER_READ_PATH_STREAM_WATCHDOG_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "common/base/mutex.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_interceptor.h"

namespace granary {

class StreamWatchdog {
 public:
  explicit StreamWatchdog(std::chrono::milliseconds stall_limit);
  ~StreamWatchdog();
  StreamWatchdog(const StreamWatchdog&) = delete;
  StreamWatchdog& operator=(const StreamWatchdog&) = delete;

  // A factory for grpc::ServerBuilder::experimental().
  // SetInterceptorCreators(); the watchdog must outlive the server.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> InterceptorFactory();

  // Calls cancelled so far.
  uint64_t cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

  // For the interceptor: a send of the call of `context` started, or ended
  // (or the call did).
  void SendStarted(grpc::ServerContextBase* context);
  void SendEnded(grpc::ServerContextBase* context);

 private:
  void Watch();

  const std::chrono::milliseconds stall_limit_;
  Mutex mutex_;
  CondVar stop_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  // Calls with a send pending, and since when.
  absl::flat_hash_map<grpc::ServerContextBase*, std::chrono::steady_clock::time_point> sending_
      ABSL_GUARDED_BY(mutex_);
  std::atomic<uint64_t> cancelled_{0};
  std::thread thread_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_READ_PATH_STREAM_WATCHDOG_H_
