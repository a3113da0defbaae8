#include "fuse_client/passthrough/passthrough_files.h"

#include <sys/stat.h>

#include <algorithm>

#include "common/base/logging.h"
#include "common/base/memory_file.h"
#include "common/dataset/chunk_math.h"
#include "common/jobs/read_origin.h"

namespace granary::fuse {
namespace {

// Files up to this size are read through at their first open, when granaryd
// owns them: one round trip, and the kernel reads the result itself. Larger
// files stream through granary-fuse until they are held whole, so that an
// open never waits for a whole large file.
constexpr uint64_t kReadThroughAtOpenBytes = 8 << 20;

// How far past an opened file its manifest is looked through for files to
// ask for ahead.
constexpr uint64_t kAheadFilesLookedAt = 4 * kMaxAheadFiles;

}  // namespace

PassthroughFiles::PassthroughFiles(KernelChannel* channel, LocalChunkReader* local, size_t max_kept,
                                   uint64_t max_memory_bytes)
    : channel_(channel), local_(local), max_kept_(max_kept), max_memory_bytes_(max_memory_bytes) {}

void PassthroughFiles::Close() {
  MutexLock lock(&mutex_);
  closed_ = true;
  for (auto& [inode, state] : states_) DropKeptLocked(state);
}

bool PassthroughFiles::StillVerified(int fd, int64_t verified_ctime_ns) {
  struct stat st;
  return ::fstat(fd, &st) == 0 && st.st_nlink > 0 &&
         st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec == verified_ctime_ns;
}

void PassthroughFiles::DropKeptLocked(State& state) {
  if (state.backing_id > 0) channel_->UnregisterBacking(state.backing_id);
  state.backing_id = 0;
  if (state.fd.valid()) {
    auto it = inodes_.find(state.file);
    if (it != inodes_.end()) inodes_.erase(it);
  }
  state.fd = UniqueFd();
  memory_bytes_ -= state.memory_bytes;
  state.memory_bytes = 0;
  UnkeepLocked(state);
}

void PassthroughFiles::UnkeepLocked(State& state) {
  if (!state.in_lru) return;
  lru_.erase(state.lru_position);
  state.in_lru = false;
}

void PassthroughFiles::IdleLocked(uint64_t inode, State& state) {
  if (state.passthrough_opens > 0 || state.cached_opens > 0 || state.busy) return;
  if (!state.fd.valid() || state.withdrawn || closed_ || max_kept_ == 0) {
    DropKeptLocked(state);
    states_.erase(inode);
    return;
  }
  UnkeepLocked(state);
  lru_.push_front(inode);
  state.lru_position = lru_.begin();
  state.in_lru = true;
  while (lru_.size() > max_kept_) {
    const uint64_t oldest = lru_.back();
    State& victim = states_.at(oldest);
    DropKeptLocked(victim);
    states_.erase(oldest);
  }
}

void PassthroughFiles::WithdrawLocked(uint64_t inode, State& state) {
  state.withdrawn = true;
  IdleLocked(inode, state);
}

int32_t PassthroughFiles::Open(const OpenFile& file, OwnedWhole owned_whole) {
  const int32_t backing_id = ChooseMode(file, owned_whole);
  if (keeper_ != nullptr) keeper_->Opened(file.inode, backing_id);
  return backing_id;
}

std::vector<AheadFile> PassthroughFiles::AheadOfLocked(const OpenFile& file,
                                                       OwnedWhole owned_whole) {
  std::vector<AheadFile> ahead;
  if (max_kept_ == 0) return ahead;
  const MountedDataset& dataset = *file.dataset;
  const Manifest& manifest = dataset.snapshot().manifest;
  const uint64_t end =
      std::min<uint64_t>(manifest.entries().size(), file.file_id + 1 + kAheadFilesLookedAt);
  for (uint64_t id = file.file_id + 1; id < end && ahead.size() < kMaxAheadFiles; ++id) {
    const ManifestEntry& entry = manifest.entries()[id];
    const uint64_t inode = dataset.InodeOf(id + 1);
    if (entry.type != EntryType::kFile || entry.size == 0 || manifest.IsHardLinkAlias(id) ||
        states_.contains(inode) || asked_ahead_.contains(inode) || !owned_whole(id, entry.size)) {
      continue;
    }
    ahead.push_back({id, entry.size});
    asked_ahead_.insert(inode);
  }
  return ahead;
}

std::vector<PassthroughFiles::Ahead> PassthroughFiles::RegisterAhead(
    std::vector<AheadWholeFile> answered) {
  std::vector<Ahead> registered;
  for (AheadWholeFile& held : answered) {
    if (!StillVerified(held.file.fd.get(), held.file.verified_ctime_ns)) continue;
    absl::StatusOr<int32_t> backing_id = channel_->RegisterBacking(held.file.fd.get());
    if (!backing_id.ok()) continue;
    registered.push_back({std::move(held), *backing_id});
  }
  return registered;
}

void PassthroughFiles::KeepAheadLocked(const OpenFile& file, std::span<const AheadFile> asked,
                                       std::vector<Ahead> ahead, uint64_t withdrawals) {
  for (const AheadFile& asked_file : asked) {
    asked_ahead_.erase(file.dataset->InodeOf(asked_file.file_id + 1));
  }
  const uint64_t version = file.dataset->snapshot().manifest.version();
  for (Ahead& registered : ahead) {
    AheadWholeFile& held = registered.held;
    const uint64_t inode = file.dataset->InodeOf(held.file_id + 1);
    if (closed_ || withdrawals_ != withdrawals || states_.contains(inode)) {
      channel_->UnregisterBacking(registered.backing_id);
      continue;
    }
    State& state = states_[inode];
    state.file = {version, held.file_id};
    state.fd = std::move(held.file.fd);
    state.verified_ctime_ns = held.file.verified_ctime_ns;
    state.backing_id = registered.backing_id;
    inodes_[state.file] = inode;
    IdleLocked(inode, state);
  }
}

int32_t PassthroughFiles::ChooseMode(const OpenFile& file, OwnedWhole owned_whole) {
  const FileKey key{file.dataset->snapshot().manifest.version(), file.file_id};
  const uint32_t chunk_size = file.chunk_size();
  const uint64_t size = file.entry.size;
  const bool may_be_whole = owned_whole(file.file_id, size);
  MutexLock lock(&mutex_);
  // Looked up again after every wait: the open it waited for may have been
  // released meanwhile, its state forgotten and its memory reused.
  State* waited = &states_[file.inode];
  while (waited->busy) {
    idle_.Wait(&mutex_);
    waited = &states_[file.inode];
  }
  State& state = *waited;
  if (state.cached_opens > 0 ||
      (state.passthrough_opens == 0 && (closed_ || !channel_->passthrough()))) {
    state.cached_opens++;
    return 0;
  }
  if (state.passthrough_opens > 0) {
    // Another open of a file passed through: the kernel reads it without
    // granaryd, so it is a use as an open from a kept file is.
    state.passthrough_opens++;
    passed_through_.fetch_add(1, std::memory_order_relaxed);
    if (uses_ != nullptr && state.file == key) {
      uses_->Record(key.first, key.second, size, ChunkCount(size, chunk_size));
    }
    return state.backing_id;
  }
  UnkeepLocked(state);
  state.file = key;
  state.busy = true;
  state.withdrawn = false;
  const bool kept = state.fd.valid();
  const int kept_fd = state.fd.get();
  const int64_t kept_ctime = state.verified_ctime_ns;
  // Room for an in-memory copy is taken before asking, so that concurrent
  // opens cannot go past the budget together.
  const bool read_through = size <= kReadThroughAtOpenBytes;
  const uint64_t memory_asked =
      read_through && may_be_whole && memory_bytes_ + size <= max_memory_bytes_ ? size : 0;
  memory_bytes_ += memory_asked;
  const std::vector<AheadFile> ahead = !kept && size > 0 && may_be_whole
                                           ? AheadOfLocked(file, owned_whole)
                                           : std::vector<AheadFile>();
  const uint64_t withdrawals = withdrawals_;
  mutex_.Unlock();

  bool usable = kept && StillVerified(kept_fd, kept_ctime);
  LocalChunkReader::WholeFile whole;
  int32_t backing_id = 0;
  std::vector<Ahead> ahead_held;
  if (!usable && size > 0 && may_be_whole) {
    const WholeFileFetch fetch = !read_through      ? WholeFileFetch::kHeldOnly
                                 : memory_asked > 0 ? WholeFileFetch::kReadThroughInMemory
                                                    : WholeFileFetch::kReadThrough;
    std::vector<AheadWholeFile> answered_ahead;
    absl::StatusOr<LocalChunkReader::WholeFile> fetched = local_->OpenWholeFile(
        {key.first, key.second, 0}, size, chunk_size, fetch, ahead, &answered_ahead);
    ahead_held = RegisterAhead(std::move(answered_ahead));
    if (fetched.ok() &&
        (fetched->in_memory ? MemoryFile::HasSeals(fetched->fd.get(), MemoryFile::kUnchangeable)
                            : StillVerified(fetched->fd.get(), fetched->verified_ctime_ns))) {
      absl::StatusOr<int32_t> registered = channel_->RegisterBacking(fetched->fd.get());
      if (registered.ok()) {
        whole = *std::move(fetched);
        backing_id = *registered;
        // A copy of what granaryd read through for this open.
        if (whole.in_memory) NoteReadOrigin(ReadOrigin::kSource);
      }
    } else if (!fetched.ok() && !absl::IsNotFound(fetched.status())) {
      GRANARY_LOG_FIRST_N(WARNING, 10)
          << "cannot ask granaryd for a whole file: " << fetched.status();
    }
  }

  mutex_.Lock();
  state.busy = false;
  idle_.SignalAll();
  KeepAheadLocked(file, ahead, std::move(ahead_held), withdrawals);
  if (kept && !usable) DropKeptLocked(state);
  memory_bytes_ -= memory_asked;
  if (whole.fd.valid()) {
    if (state.withdrawn || closed_) {
      // Withdrawn while granaryd was answering: the answer may predate it.
      channel_->UnregisterBacking(backing_id);
    } else {
      state.fd = std::move(whole.fd);
      state.verified_ctime_ns = whole.verified_ctime_ns;
      state.backing_id = backing_id;
      inodes_[key] = file.inode;
      usable = true;
      if (whole.in_memory) {
        // Let go at the last release: a later open finds the cache's copy.
        state.memory_bytes = size;
        memory_bytes_ += size;
        state.withdrawn = true;
      }
    }
  } else if (usable && state.withdrawn) {
    DropKeptLocked(state);
    usable = false;
  }
  if (!usable) {
    state.cached_opens++;
    return 0;
  }
  state.passthrough_opens++;
  passed_through_.fetch_add(1, std::memory_order_relaxed);
  if (kept) {
    from_kept_.fetch_add(1, std::memory_order_relaxed);
    if (uses_ != nullptr) uses_->Record(key.first, key.second, size, ChunkCount(size, chunk_size));
  }
  return state.backing_id;
}

void PassthroughFiles::Release(uint64_t inode, int32_t backing_id) {
  if (keeper_ != nullptr) keeper_->Released(inode, backing_id);
  MutexLock lock(&mutex_);
  auto it = states_.find(inode);
  if (it != states_.end()) ReleaseLocked(inode, it->second, backing_id);
}

void PassthroughFiles::ReleaseLocked(uint64_t inode, State& state, int32_t backing_id) {
  if (backing_id > 0) {
    state.passthrough_opens--;
  } else {
    state.cached_opens--;
  }
  IdleLocked(inode, state);
}

void PassthroughFiles::Inherit(const v1::Handover& handover) {
  MutexLock lock(&mutex_);
  for (const v1::OpenInode& open : handover.open_inodes()) {
    State& state = states_[open.inode()];
    state.passthrough_opens = static_cast<int>(open.passthrough_opens());
    state.cached_opens = static_cast<int>(open.cached_opens());
    state.backing_id = open.passthrough_opens() > 0 ? open.backing_id() : 0;
  }
}

void PassthroughFiles::ReleaseInherited(uint64_t inode) {
  MutexLock lock(&mutex_);
  auto it = states_.find(inode);
  if (it == states_.end()) return;
  State& state = it->second;
  if (state.passthrough_opens <= 0 && state.cached_opens <= 0) return;
  // The kernel holds an inode in one mode at a time, so the open released
  // was in the mode with opens left.
  const int32_t backing_id = state.passthrough_opens > 0 ? state.backing_id : 0;
  if (keeper_ != nullptr) keeper_->Released(inode, backing_id);
  ReleaseLocked(inode, state, backing_id);
}

void PassthroughFiles::Withdraw(const v1::WithdrawnFiles& withdrawn) {
  MutexLock lock(&mutex_);
  if (!withdrawn.complete() || withdrawn.files_size() > 0) withdrawals_++;
  if (!withdrawn.complete()) {
    std::vector<uint64_t> kept;
    kept.reserve(inodes_.size());
    for (const auto& [file, inode] : inodes_) kept.push_back(inode);
    for (uint64_t inode : kept) {
      auto it = states_.find(inode);
      if (it != states_.end()) WithdrawLocked(inode, it->second);
    }
    return;
  }
  for (const v1::FileRef& file : withdrawn.files()) {
    auto kept = inodes_.find(FileKey{file.dataset_version(), file.file_id()});
    if (kept == inodes_.end()) continue;
    const uint64_t inode = kept->second;
    WithdrawLocked(inode, states_.at(inode));
  }
}

}  // namespace granary::fuse
