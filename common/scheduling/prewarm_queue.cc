#include "common/scheduling/prewarm_queue.h"

#include <utility>

#include "common/base/logging.h"
#include "common/base/printable.h"

namespace granary {
namespace {

// "dataset 'd'" or "dataset 'd' onto group 'g'", for log lines.
std::string Describe(const std::string& dataset, const std::string& group) {
  std::string text = "dataset '" + Printable(dataset) + "'";
  if (!group.empty()) text += " onto group '" + Printable(group) + "'";
  return text;
}

}  // namespace

PrewarmQueue::PrewarmQueue(std::shared_ptr<grpc::Channel> granaryd, std::string occasion)
    : stub_(v1::Granary::NewStub(std::move(granaryd))),
      occasion_(std::move(occasion)),
      thread_([this] { Run(); }) {}

PrewarmQueue::~PrewarmQueue() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
    if (running_ != nullptr) running_->TryCancel();
  }
  wake_.Signal();
  thread_.join();
}

void PrewarmQueue::Warm(const std::string& dataset, const std::string& group) {
  Target target(dataset, group);
  MutexLock lock(&mutex_);
  if (pending_.contains(target)) return;
  if (queue_.size() >= kMaxQueued) {
    GRANARY_LOG(WARNING) << "not prewarming " << Describe(dataset, group) << " " << occasion_
                         << ": " << kMaxQueued << " prewarms are already queued";
    return;
  }
  pending_.insert(target);
  queue_.push_back(std::move(target));
  wake_.Signal();
}

void PrewarmQueue::Run() {
  while (true) {
    Target target;
    {
      MutexLock lock(&mutex_);
      while (!stopping_ && queue_.empty()) wake_.Wait(&mutex_);
      if (stopping_) return;
      target = std::move(queue_.front());
      queue_.pop_front();
    }
    Prewarm(target);
    MutexLock lock(&mutex_);
    pending_.erase(target);
  }
}

void PrewarmQueue::Prewarm(const Target& target) {
  const auto& [dataset, group] = target;
  grpc::ClientContext context;
  {
    MutexLock lock(&mutex_);
    if (stopping_) return;
    running_ = &context;
  }
  v1::PrewarmRequest request;
  request.set_name(dataset);
  request.set_group(group);
  std::unique_ptr<grpc::ClientReader<v1::PrewarmProgress>> stream =
      stub_->Prewarm(&context, request);
  v1::PrewarmProgress progress;
  v1::PrewarmProgress last;
  while (stream->Read(&progress)) last = progress;
  grpc::Status status = stream->Finish();
  {
    MutexLock lock(&mutex_);
    running_ = nullptr;
  }
  if (!status.ok()) {
    GRANARY_LOG(WARNING) << "prewarm of " << Describe(dataset, group) << " " << occasion_
                         << " failed: " << status.error_message();
    return;
  }
  GRANARY_LOG(INFO) << "prewarmed " << Describe(dataset, group) << " " << occasion_ << ": "
                    << last.bytes_done() << " of " << last.bytes_total() << " bytes fetched, "
                    << last.chunks_already_cached() << " chunks were cached, "
                    << last.failures_size() << " files failed";
}

}  // namespace granary
