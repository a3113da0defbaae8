#include "fuse_client/inode_table.h"

namespace granary::fuse {
namespace {

// st_blksize, as ext4 shows it: buffered readers size their buffer by it
// (Python's io: every seek of tarfile, zipfile or numpy's .npz then reads
// that much), and 1 MiB made such random reads 2.5-6x slower than on ext4.
// The kernel's readahead, not this, sizes the reads granary-fuse sees.
constexpr blksize_t kPreferredIoBytes = 4096;

// Every dataset root and the mount root show this mtime: the mount's start.
const int64_t kMountTimeNs = [] {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
}();

// Nanoseconds since 1970 as the kernel wants them: tv_nsec in [0, 1e9) on
// both sides of 1970, so 1969-12-31 23:59:58.25 is {-2, 250000000}.
struct timespec TimespecOf(int64_t ns) {
  constexpr int64_t kPerSecond = 1'000'000'000;
  struct timespec out = {static_cast<time_t>(ns / kPerSecond), static_cast<long>(ns % kPerSecond)};
  if (out.tv_nsec < 0) {
    out.tv_nsec += kPerSecond;
    --out.tv_sec;
  }
  return out;
}

void StatDirectory(int64_t mtime_ns, uint32_t mode, struct stat* out) {
  *out = {};
  out->st_mode = S_IFDIR | (mode & 07777);
  out->st_nlink = 2;
  out->st_mtim = out->st_ctim = out->st_atim = TimespecOf(mtime_ns);
}

// Orders like the names it is taken from, ties aside: names hold no NUL, so
// the zero padding of a short name sorts before any longer name's bytes.
uint64_t NameKey(std::string_view name) {
  uint64_t key = 0;
  for (size_t i = 0; i < 8; ++i) {
    key = key << 8 | (i < name.size() ? static_cast<unsigned char>(name[i]) : 0);
  }
  return key;
}

std::string_view ParentOf(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
}

}  // namespace

MountedDataset::MountedDataset(uint32_t slot, DatasetSnapshot snapshot)
    : slot_(slot), snapshot_(std::move(snapshot)) {
  const ManifestEntries& entries = snapshot_.manifest.entries();
  manifest_has_root_ = !entries.empty() && entries[0].path.empty();
  const uint64_t nodes = entries.size() + 1;
  // Calls visit(parent, child) for every node but the root, in path order.
  // Entries are sorted by path, so the parent changes seldom and is looked up
  // only then; orphans (whose directory is not listed) are skipped.
  auto for_each_child = [&](auto visit) {
    constexpr uint64_t kNoParent = ~uint64_t{0};
    std::string_view last_parent_path;
    uint64_t last_parent = 0;
    for (uint64_t i = manifest_has_root_ ? 1 : 0; i < entries.size(); ++i) {
      std::string_view parent_path = ParentOf(entries[i].path);
      if (parent_path != last_parent_path || i == 0) {
        if (parent_path.empty()) {
          last_parent = 0;
        } else {
          std::optional<uint64_t> id = snapshot_.manifest.Find(parent_path);
          last_parent = id && entries[*id].type == EntryType::kDirectory ? *id + 1 : kNoParent;
        }
        last_parent_path = parent_path;
      }
      if (last_parent != kNoParent) visit(last_parent, i + 1);
    }
  };
  // The parents are found twice rather than kept in a table of a node each:
  // fresh memory costs more than the second pass.
  child_begin_.assign(nodes + 1, 0);
  for_each_child([&](uint64_t parent, uint64_t) { ++child_begin_[parent + 1]; });
  for (uint64_t n = 0; n < nodes; ++n) child_begin_[n + 1] += child_begin_[n];
  children_.resize(child_begin_[nodes]);
  child_keys_.resize(child_begin_[nodes]);
  // Placing a child advances its parent's begin to the next one's, so the
  // begins are shifted back afterwards.
  for_each_child([&](uint64_t parent, uint64_t child) {
    uint64_t at = child_begin_[parent]++;
    children_[at] = child;
    child_keys_[at] = NameKey(NameOf(child));
  });
  for (uint64_t n = nodes; n > 0; --n) child_begin_[n] = child_begin_[n - 1];
  child_begin_[0] = 0;
}

const ManifestEntry* MountedDataset::EntryOf(uint64_t node) const {
  if (node == 0) return manifest_has_root_ ? &snapshot_.manifest.entries()[0] : nullptr;
  return &snapshot_.manifest.entries()[node - 1];
}

std::span<const uint64_t> MountedDataset::Children(uint64_t node) const {
  if (node >= node_count()) return {};
  return std::span<const uint64_t>(children_).subspan(child_begin_[node],
                                                      child_begin_[node + 1] - child_begin_[node]);
}

std::string_view MountedDataset::NameOf(uint64_t node) const {
  if (node == 0) return name();
  std::string_view path = snapshot_.manifest.entries()[node - 1].path;
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::optional<uint64_t> MountedDataset::Lookup(uint64_t node, std::string_view name) const {
  if (node >= node_count()) return std::nullopt;
  const uint64_t key = NameKey(name);
  // The children of `node` sit in children_ in name order, so their keys
  // are in order too: a binary search over their positions finds the first
  // that is not before `name`. Written out, not std::ranges::partition_point
  // over std::views::iota, because clang 14 rejects libstdc++ 12's iota_view.
  const uint64_t end = child_begin_[node + 1];
  uint64_t low = child_begin_[node];
  uint64_t high = end;
  while (low < high) {
    const uint64_t middle = low + (high - low) / 2;
    if (child_keys_[middle] < key ||
        (child_keys_[middle] == key && NameOf(children_[middle]) < name)) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  if (low == end || child_keys_[low] != key || NameOf(children_[low]) != name) {
    return std::nullopt;
  }
  return children_[low];
}

void MountedDataset::Stat(uint64_t node, struct stat* out) const {
  const ManifestEntry* entry = EntryOf(node);
  if (entry == nullptr) {
    StatDirectory(kMountTimeNs, 0555, out);
  } else if (entry->type == EntryType::kDirectory) {
    StatDirectory(entry->mtime_ns, entry->mode, out);
    out->st_size = static_cast<off_t>(entry->size);
  } else {
    *out = {};
    out->st_mode = (entry->type == EntryType::kSymlink ? S_IFLNK : S_IFREG) | (entry->mode & 07777);
    out->st_size = static_cast<off_t>(
        entry->type == EntryType::kSymlink ? entry->symlink_target.size() : entry->size);
  }
  if (entry != nullptr) {
    // Access times are not kept (reading the source changes them); they show
    // the mtime.
    out->st_mtim = out->st_atim = TimespecOf(entry->mtime_ns);
    out->st_ctim = TimespecOf(entry->ctime_ns);
    out->st_nlink = entry->nlink;
    out->st_uid = entry->uid;
    out->st_gid = entry->gid;
  }
  out->st_blocks = (out->st_size + 511) / 512;
  out->st_ino = InodeOf(node);
  out->st_blksize = kPreferredIoBytes;
}

InodeTable::Node InodeTable::Resolve(uint64_t inode) const {
  uint64_t slot_plus_one = inode >> 40;
  if (slot_plus_one == 0) return {};
  ReaderMutexLock lock(&mutex_);
  auto slot = slots_.find(static_cast<uint32_t>(slot_plus_one - 1));
  if (slot == slots_.end()) return {};
  uint64_t node = inode & ((uint64_t{1} << 40) - 1);
  if (node >= slot->second.dataset->node_count()) return {};
  return {slot->second.dataset, node};
}

std::shared_ptr<const MountedDataset> InodeTable::FindDataset(std::string_view name) const {
  ReaderMutexLock lock(&mutex_);
  auto it = root_.find(name);
  return it == root_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<const MountedDataset>> InodeTable::ListDatasets() const {
  ReaderMutexLock lock(&mutex_);
  std::vector<std::shared_ptr<const MountedDataset>> out;
  out.reserve(root_.size());
  for (const auto& [name, dataset] : root_) out.push_back(dataset);
  return out;
}

std::shared_ptr<const MountedDataset> InodeTable::FindVersion(std::string_view name,
                                                              uint64_t version) const {
  ReaderMutexLock lock(&mutex_);
  for (const auto& [number, slot] : slots_) {
    if (slot.dataset->name() == name && slot.dataset->snapshot().manifest.version() == version) {
      return slot.dataset;
    }
  }
  return nullptr;
}

void InodeTable::Publish(std::vector<std::shared_ptr<const MountedDataset>> datasets) {
  std::map<std::string, std::shared_ptr<const MountedDataset>, std::less<>> root;
  for (auto& dataset : datasets) root.emplace(dataset->name(), std::move(dataset));
  const Clock::time_point now = Clock::now();
  WriterMutexLock lock(&mutex_);
  root_ = std::move(root);
  for (auto& [number, slot] : slots_) {
    auto listed = root_.find(slot.dataset->name());
    if (listed != root_.end() && listed->second == slot.dataset) {
      slot.retired_at.reset();
    } else if (!slot.retired_at) {
      slot.retired_at = now;
    }
  }
}

std::shared_ptr<const MountedDataset> InodeTable::Add(DatasetSnapshot snapshot) {
  // Building the directory structure of a large manifest takes a while; only
  // Add() adds slots, so readers are blocked only for the insertion.
  MutexLock add_lock(&add_mutex_);
  auto dataset = std::make_shared<const MountedDataset>(next_slot_, std::move(snapshot));
  {
    WriterMutexLock lock(&mutex_);
    slots_.emplace(next_slot_++, Slot{dataset, std::nullopt});
  }
  if (journal_ != nullptr) {
    journal_->SlotAdded(dataset->slot(), dataset->name(), dataset->snapshot().manifest.version());
  }
  return dataset;
}

std::shared_ptr<const MountedDataset> InodeTable::Adopt(uint32_t slot, DatasetSnapshot snapshot) {
  MutexLock add_lock(&add_mutex_);
  auto dataset = std::make_shared<const MountedDataset>(slot, std::move(snapshot));
  WriterMutexLock lock(&mutex_);
  slots_.insert_or_assign(slot, Slot{dataset, Clock::now()});
  next_slot_ = std::max(next_slot_, slot + 1);
  return dataset;
}

void InodeTable::SkipSlotsBelow(uint32_t next_slot) {
  MutexLock add_lock(&add_mutex_);
  next_slot_ = std::max(next_slot_, next_slot);
}

bool InodeTable::HasSlot(uint32_t slot) const {
  ReaderMutexLock lock(&mutex_);
  return slots_.contains(slot);
}

std::vector<std::shared_ptr<const MountedDataset>> InodeTable::ReleaseUnused() {
  std::vector<std::shared_ptr<const MountedDataset>> released;
  const Clock::time_point now = Clock::now();
  {
    WriterMutexLock lock(&mutex_);
    // Every reference to a version outside the table was copied from one the
    // table handed out under `mutex_`, so with the lock held exclusively, a
    // count of one means that nothing holds it and nothing can take it anew.
    absl::erase_if(slots_, [&](const auto& entry) {
      const Slot& slot = entry.second;
      if (!slot.retired_at || now - *slot.retired_at < release_after_ ||
          slot.dataset.use_count() != 1) {
        return false;
      }
      released.push_back(slot.dataset);
      return true;
    });
  }
  if (journal_ != nullptr) {
    for (const auto& dataset : released) journal_->SlotReleased(dataset->slot());
  }
  return released;
}

std::vector<uint64_t> InodeTable::KeptVersions() const {
  ReaderMutexLock lock(&mutex_);
  std::vector<uint64_t> versions;
  versions.reserve(slots_.size());
  for (const auto& [number, slot] : slots_) {
    versions.push_back(slot.dataset->snapshot().manifest.version());
  }
  return versions;
}

void InodeTable::StatRoot(struct stat* out) const {
  StatDirectory(kMountTimeNs, 0555, out);
  out->st_ino = kRootInode;
  out->st_blksize = kPreferredIoBytes;
  out->st_uid = uid_;
  out->st_gid = gid_;
}

}  // namespace granary::fuse
