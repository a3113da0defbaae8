#include "cache_server/read_path/stream_watchdog.h"

#include <algorithm>

#include "common/base/logging.h"

namespace granary {
namespace {

class WatchedCall final : public grpc::experimental::Interceptor {
 public:
  WatchedCall(StreamWatchdog* watchdog, grpc::ServerContextBase* context)
      : watchdog_(watchdog), context_(context) {}
  ~WatchedCall() override { watchdog_->SendEnded(context_); }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      watchdog_->SendStarted(context_);
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_SEND_MESSAGE)) {
      watchdog_->SendEnded(context_);
    }
    methods->Proceed();
  }

 private:
  StreamWatchdog* const watchdog_;
  grpc::ServerContextBase* const context_;
};

class WatchedCallFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit WatchedCallFactory(StreamWatchdog* watchdog) : watchdog_(watchdog) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new WatchedCall(watchdog_, info->server_context());
  }

 private:
  StreamWatchdog* const watchdog_;
};

}  // namespace

StreamWatchdog::StreamWatchdog(std::chrono::milliseconds stall_limit) : stall_limit_(stall_limit) {
  thread_ = std::thread([this] { Watch(); });
}

StreamWatchdog::~StreamWatchdog() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
  }
  stop_.SignalAll();
  thread_.join();
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
StreamWatchdog::InterceptorFactory() {
  return std::make_unique<WatchedCallFactory>(this);
}

void StreamWatchdog::SendStarted(grpc::ServerContextBase* context) {
  MutexLock lock(&mutex_);
  sending_[context] = std::chrono::steady_clock::now();
}

void StreamWatchdog::SendEnded(grpc::ServerContextBase* context) {
  MutexLock lock(&mutex_);
  sending_.erase(context);
}

void StreamWatchdog::Watch() {
  // Checking four times per limit cancels a call at most 1.25 limits after
  // its send began.
  const auto period = std::max(stall_limit_ / 4, std::chrono::milliseconds(10));
  MutexLock lock(&mutex_);
  while (!stop_.WaitFor(&mutex_, period,
                        [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return stopping_; })) {
    const auto now = std::chrono::steady_clock::now();
    for (auto it = sending_.begin(); it != sending_.end();) {
      auto next = std::next(it);
      if (now - it->second >= stall_limit_) {
        // Once: the call's Write() now fails and the call ends.
        it->first->TryCancel();
        cancelled_.fetch_add(1, std::memory_order_relaxed);
        GRANARY_LOG(WARNING) << "cancelled a call to " << it->first->peer()
                             << ": its client took no reply for " << stall_limit_.count() << " ms";
        sending_.erase(it);
      }
      it = next;
    }
  }
}

}  // namespace granary
