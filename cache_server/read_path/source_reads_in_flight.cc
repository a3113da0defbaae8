#include "cache_server/read_path/source_reads_in_flight.h"

#include <algorithm>
#include <utility>

namespace granary {

SourceReadsInFlight::Earlier SourceReadsInFlight::Earlier::Done(uint64_t begin, Bytes bytes) {
  std::promise<Bytes> done;
  const uint64_t end = begin + bytes->size();
  done.set_value(std::move(bytes));
  return {begin, end, done.get_future().share()};
}

SourceReadsInFlight::Reading::~Reading() {
  if (list_ != nullptr) Finish(nullptr);
}

SourceReadsInFlight::Reading::Reading(Reading&& other) noexcept
    : list_(std::exchange(other.list_, nullptr)),
      key_(other.key_),
      id_(other.id_),
      earlier_(std::move(other.earlier_)) {}

void SourceReadsInFlight::Reading::Finish(Bytes bytes) {
  if (list_ == nullptr) return;
  std::exchange(list_, nullptr)->Finish(key_, id_, std::move(bytes));
}

SourceReadsInFlight::Reading SourceReadsInFlight::Begin(const ChunkKey& key, uint64_t begin,
                                                        uint64_t end, bool for_reader) {
  std::vector<Earlier> earlier;
  auto promise = std::make_shared<std::promise<Bytes>>();
  uint64_t id;
  {
    MutexLock lock(&mu_);
    id = next_id_++;
    std::vector<InFlight>& reads = reads_[key];
    for (const InFlight& read : reads) {
      if (read.begin < end && begin < read.end && (read.for_reader || !for_reader)) {
        earlier.push_back({read.begin, read.end, read.bytes});
      }
    }
    reads.push_back({.id = id,
                     .begin = begin,
                     .end = end,
                     .for_reader = for_reader,
                     .promise = promise,
                     .bytes = promise->get_future().share()});
  }
  std::sort(earlier.begin(), earlier.end(),
            [](const Earlier& a, const Earlier& b) { return a.begin < b.begin; });
  return Reading(this, key, id, std::move(earlier));
}

void SourceReadsInFlight::Finish(const ChunkKey& key, uint64_t id, Bytes bytes) {
  std::shared_ptr<std::promise<Bytes>> promise;
  {
    MutexLock lock(&mu_);
    auto it = reads_.find(key);
    std::vector<InFlight>& reads = it->second;
    auto read = std::find_if(reads.begin(), reads.end(),
                             [id](const InFlight& listed) { return listed.id == id; });
    promise = std::move(read->promise);
    reads.erase(read);
    if (reads.empty()) reads_.erase(it);
  }
  promise->set_value(std::move(bytes));
}

}  // namespace granary
