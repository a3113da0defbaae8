#include "fuse_client/read_path/readahead.h"

namespace granary::fuse {

Readahead::Readahead(int threads, ChunkCache* cache, ChunkFetcher* fetcher, PageStore* page_store)
    : cache_(cache),
      fetcher_(fetcher),
      page_store_(page_store),
      max_queued_(static_cast<size_t>(threads) * 8) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
}

Readahead::~Readahead() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
    queue_.clear();
  }
  wake_.SignalAll();
  for (std::thread& thread : threads_) thread.join();
}

void Readahead::Schedule(std::shared_ptr<OpenFile> file, uint32_t chunk_index,
                         bool into_page_cache) {
  const ChunkKey key = file->KeyOf(chunk_index);
  if (cache_->Contains(key)) return;
  {
    MutexLock lock(&mutex_);
    if (queue_.size() >= max_queued_ || (!into_page_cache && prefetched_.contains(key))) return;
    for (const Task& queued : queue_) {
      if (queued.file->KeyOf(queued.chunk_index) == key &&
          queued.into_page_cache == into_page_cache) {
        return;
      }
    }
    queue_.push_back(Task{std::move(file), chunk_index, into_page_cache});
  }
  wake_.Signal();
}

void Readahead::RememberPrefetchLocked(const ChunkKey& key) {
  constexpr size_t kRememberedPrefetches = 1024;
  if (!prefetched_.insert(key).second) return;
  prefetch_order_.push_back(key);
  if (prefetch_order_.size() > kRememberedPrefetches) {
    prefetched_.erase(prefetch_order_.front());
    prefetch_order_.pop_front();
  }
}

void Readahead::Work() {
  for (;;) {
    Task task;
    {
      MutexLock lock(&mutex_);
      while (!stopping_ && queue_.empty()) wake_.Wait(&mutex_);
      if (stopping_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    // A sequential reader reads the chunks the local granaryd holds straight
    // from its store (FileReader): of those, only the disk read is started.
    if (!task.into_page_cache && fetcher_->PrefetchLocal(task.file->ref(), task.chunk_index).ok()) {
      MutexLock lock(&mutex_);
      RememberPrefetchLocked(task.file->KeyOf(task.chunk_index));
      continue;
    }
    // Errors are not reported here: the reader that needs the chunk fetches
    // it again and gets the error itself.
    task.file
        ->LoadChunk(task.chunk_index, *cache_, *fetcher_,
                    task.into_page_cache ? page_store_ : nullptr)
        .IgnoreError();
  }
}

}  // namespace granary::fuse
