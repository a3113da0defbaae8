// SegmentSealer makes closed segments durable off the write path: on a
// background thread it fdatasyncs each segment handed to it and then has it
// marked sealed in the index, so that the next open need not verify its
// chunks.
//
// Segments still queued when the sealer is destroyed stay unsealed; that is
// safe, it only means the next open verifies them.
//
// Thread-safety: Seal() may be called from any thread.
#ifndef GRANARY_CACHE_SERVER_STORE_SEGMENT_SEALER_H_
#define GRANARY_CACHE_SERVER_STORE_SEGMENT_SEALER_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "cache_server/store/segment_file.h"

namespace granary::store {

class SegmentSealer {
 public:
  // `mark_sealed` records that a segment's bytes are durable; it runs on the
  // sealer's thread.
  explicit SegmentSealer(std::function<absl::Status(uint64_t segment_id)> mark_sealed);
  ~SegmentSealer();
  SegmentSealer(const SegmentSealer&) = delete;
  SegmentSealer& operator=(const SegmentSealer&) = delete;

  // Queues a segment to which nothing more will be written.
  void Seal(std::shared_ptr<SegmentFile> segment);

 private:
  void Run();

  const std::function<absl::Status(uint64_t segment_id)> mark_sealed_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<SegmentFile>> queue_;  // Guarded by mu_.
  bool stopping_ = false;                           // Guarded by mu_.
  std::thread thread_;                              // Last: starts once the rest exists.
};

}  // namespace granary::store

#endif  // GRANARY_CACHE_SERVER_STORE_SEGMENT_SEALER_H_
