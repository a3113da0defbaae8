#include "csi/placement_prewarmer.h"

#include <utility>

#include "common/logging.h"
#include "common/printable.h"

namespace granary::csi_driver {

PlacementPrewarmer::PlacementPrewarmer(std::shared_ptr<grpc::Channel> granaryd)
    : stub_(granary::v1::Granary::NewStub(std::move(granaryd))), thread_([this] { Run(); }) {}

PlacementPrewarmer::~PlacementPrewarmer() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
    if (running_ != nullptr) running_->TryCancel();
  }
  wake_.Signal();
  thread_.join();
}

void PlacementPrewarmer::Warm(const std::string& dataset) {
  MutexLock lock(&mutex_);
  if (pending_.contains(dataset)) return;
  if (queue_.size() >= kMaxQueued) {
    GRANARY_LOG(WARNING) << "not prewarming dataset '" << Printable(dataset) << "': " << kMaxQueued
                         << " prewarms are already queued";
    return;
  }
  pending_.insert(dataset);
  queue_.push_back(dataset);
  wake_.Signal();
}

void PlacementPrewarmer::Run() {
  while (true) {
    std::string dataset;
    {
      MutexLock lock(&mutex_);
      while (!stopping_ && queue_.empty()) wake_.Wait(&mutex_);
      if (stopping_) return;
      dataset = std::move(queue_.front());
      queue_.pop_front();
    }
    Prewarm(dataset);
    MutexLock lock(&mutex_);
    pending_.erase(dataset);
  }
}

void PlacementPrewarmer::Prewarm(const std::string& dataset) {
  grpc::ClientContext context;
  {
    MutexLock lock(&mutex_);
    if (stopping_) return;
    running_ = &context;
  }
  granary::v1::PrewarmRequest request;
  request.set_name(dataset);
  std::unique_ptr<grpc::ClientReader<granary::v1::PrewarmProgress>> stream =
      stub_->Prewarm(&context, request);
  granary::v1::PrewarmProgress progress;
  granary::v1::PrewarmProgress last;
  while (stream->Read(&progress)) last = progress;
  grpc::Status status = stream->Finish();
  {
    MutexLock lock(&mutex_);
    running_ = nullptr;
  }
  if (!status.ok()) {
    GRANARY_LOG(WARNING) << "prewarm of dataset '" << Printable(dataset)
                         << "' on placement failed: " << status.error_message();
    return;
  }
  GRANARY_LOG(INFO) << "prewarmed dataset '" << Printable(dataset)
                    << "' on placement: " << last.bytes_done() << " of " << last.bytes_total()
                    << " bytes fetched, " << last.chunks_already_cached() << " chunks were cached, "
                    << last.failures_size() << " files failed";
}

}  // namespace granary::csi_driver
