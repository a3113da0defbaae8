#include "fuse_client/read_path/page_store.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/base/logging.h"

namespace granary::fuse {

PageStore::PageStore(size_t max_queued) : max_queued_(max_queued) {}

PageStore::~PageStore() { Detach(); }

void PageStore::Attach(fuse_session* session) {
  Detach();
  MutexLock lock(&mutex_);
  attached_ = true;
  worker_ = std::thread([this, session] { Work(session); });
}

void PageStore::Detach() {
  std::thread worker;
  {
    MutexLock lock(&mutex_);
    attached_ = false;
    queue_.clear();
    awaiting_answers_.clear();
    worker = std::move(worker_);
  }
  wake_.SignalAll();
  if (worker.joinable()) worker.join();
}

void PageStore::Store(uint64_t inode, uint64_t offset, std::shared_ptr<const ChunkBytes> chunk) {
  {
    MutexLock lock(&mutex_);
    if (!attached_ || queue_.size() + awaiting_answers_.size() >= max_queued_) {
      ++dropped_;
      return;
    }
    if (WaitingLocked(inode, offset)) return;
    queue_.push_back(Task{inode, offset, std::move(chunk)});
  }
  wake_.Signal();
}

PageStore::Answering PageStore::BeginAnswer(uint64_t inode, uint64_t offset, uint64_t size) {
  MutexLock lock(&mutex_);
  return answering_.emplace(inode, std::make_pair(offset, offset + size));
}

void PageStore::EndAnswer(Answering answering) {
  bool requeued = false;
  {
    MutexLock lock(&mutex_);
    answering_.erase(answering);
    for (auto it = awaiting_answers_.begin(); it != awaiting_answers_.end();) {
      if (AnsweringLocked(*it)) {
        ++it;
        continue;
      }
      queue_.push_back(std::move(*it));
      it = awaiting_answers_.erase(it);
      requeued = true;
    }
  }
  if (requeued) wake_.Signal();
}

bool PageStore::WaitingLocked(uint64_t inode, uint64_t offset) const {
  auto same = [&](const Task& task) { return task.inode == inode && task.offset == offset; };
  return std::any_of(queue_.begin(), queue_.end(), same) ||
         std::any_of(awaiting_answers_.begin(), awaiting_answers_.end(), same);
}

bool PageStore::AnsweringLocked(const Task& task) const {
  const uint64_t end = task.offset + task.chunk->size;
  auto [first, last] = answering_.equal_range(task.inode);
  for (auto it = first; it != last; ++it) {
    if (it->second.first < end && task.offset < it->second.second) return true;
  }
  return false;
}

uint64_t PageStore::stored() const {
  MutexLock lock(&mutex_);
  return stored_;
}

uint64_t PageStore::dropped() const {
  MutexLock lock(&mutex_);
  return dropped_;
}

void PageStore::Work(fuse_session* session) {
  for (;;) {
    Task task;
    {
      MutexLock lock(&mutex_);
      while (attached_ && queue_.empty()) wake_.Wait(&mutex_);
      if (!attached_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      if (AnsweringLocked(task)) {
        awaiting_answers_.push_back(std::move(task));
        continue;
      }
    }
    fuse_bufvec bytes = FUSE_BUFVEC_INIT(task.chunk->size);
    bytes.buf[0].mem = const_cast<char*>(task.chunk->bytes.get());
    int result = fuse_lowlevel_notify_store(session, task.inode, static_cast<off_t>(task.offset),
                                            &bytes, FUSE_BUF_NO_SPLICE);
    // ENOENT: the kernel forgot the inode (the file was closed and evicted),
    // so there is no page cache to fill; anything else is worth one line.
    if (result != 0 && result != -ENOENT) {
      GRANARY_LOG_FIRST_N(WARNING, 5)
          << "cannot store " << task.chunk->size << " bytes of inode " << task.inode
          << " in the kernel's page cache: " << std::strerror(-result);
    }
    MutexLock lock(&mutex_);
    ++(result == 0 ? stored_ : dropped_);
  }
}

}  // namespace granary::fuse
