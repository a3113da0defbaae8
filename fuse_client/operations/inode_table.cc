#include "fuse_client/operations/inode_table.h"

#include <malloc.h>
#include <time.h>

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/dataset/chunk_key.h"
#include "common/dataset/posix_acl.h"

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

// For least-recently-used order: a few milliseconds of precision suffice,
// and the coarse clock is the cheapest on a hot path.
int64_t CoarseNowNs() {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
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
      std::string_view parent_path = ParentPath(entries[i].path);
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
  absl::flat_hash_map<uint32_t, uint32_t> child_counts;
  for_each_child([&](uint64_t parent, uint64_t) { ++child_counts[static_cast<uint32_t>(parent)]; });
  directories_.reserve(child_counts.size() + 1);
  for (const auto& [node, count] : child_counts) directories_.push_back({node, count, 0});
  std::sort(directories_.begin(), directories_.end(),
            [](const Directory& a, const Directory& b) { return a.node < b.node; });
  // Counts become positions; each directory's is advanced past its children
  // as they are placed, which leaves it at the next one's, so the positions
  // are taken again from the end marker backwards afterwards.
  uint32_t placed = 0;
  for (Directory& directory : directories_) {
    placed += std::exchange(directory.first_child, placed);
  }
  directories_.push_back({static_cast<uint32_t>(nodes), placed, 0});
  child_counts = {};
  children_.resize(placed);
  uint64_t last_parent = nodes;  // No node: the first child looks its parent up.
  size_t parent_index = 0;
  for_each_child([&](uint64_t parent, uint64_t child) {
    if (parent != last_parent) {
      parent_index = *DirectoryIndex(parent);
      last_parent = parent;
    }
    children_[directories_[parent_index].first_child++] = static_cast<uint32_t>(child);
  });
  for (size_t i = directories_.size() - 1; i > 0; --i) {
    directories_[i].first_child = directories_[i - 1].first_child;
  }
  if (directories_.size() > 1) directories_[0].first_child = 0;
  child_keys_.resize(placed);
  for (size_t i = 0; i + 1 < directories_.size(); ++i) {
    Directory& directory = directories_[i];
    const uint32_t end = directories_[i + 1].first_child;
    // Children are in name order: what the first and last share, all share.
    const std::string_view first = NameOf(children_[directory.first_child]);
    const std::string_view last = NameOf(children_[end - 1]);
    directory.prefix = static_cast<uint32_t>(
        std::mismatch(first.begin(), first.begin() + std::min(first.size(), last.size()),
                      last.begin())
            .first -
        first.begin());
    for (uint32_t at = directory.first_child; at < end; ++at) {
      child_keys_[at] = NameKey(NameOf(children_[at]), directory.prefix);
    }
  }
}

uint32_t MountedDataset::NameKey(std::string_view name, uint32_t prefix) {
  uint32_t key = 0;
  for (size_t i = prefix; i < prefix + 4; ++i) {
    key = key << 8 | (i < name.size() ? static_cast<unsigned char>(name[i]) : 0);
  }
  return key;
}

std::optional<size_t> MountedDataset::DirectoryIndex(uint64_t node) const {
  auto found = std::lower_bound(directories_.begin(), directories_.end() - 1, node,
                                [](const Directory& d, uint64_t n) { return d.node < n; });
  if (found == directories_.end() - 1 || found->node != node) return std::nullopt;
  return found - directories_.begin();
}

const ManifestEntry* MountedDataset::EntryOf(uint64_t node) const {
  if (node == 0) return manifest_has_root_ ? &snapshot_.manifest.entries()[0] : nullptr;
  return &snapshot_.manifest.entries()[node - 1];
}

uint64_t MountedDataset::memory_bytes() const {
  return snapshot_.manifest.memory_bytes() + directories_.capacity() * sizeof(Directory) +
         (children_.capacity() + child_keys_.capacity()) * sizeof(uint32_t);
}

std::span<const uint32_t> MountedDataset::Children(uint64_t node) const {
  std::optional<size_t> index = DirectoryIndex(node);
  if (!index) return {};
  const uint32_t begin = directories_[*index].first_child;
  return std::span<const uint32_t>(children_).subspan(begin,
                                                      directories_[*index + 1].first_child - begin);
}

std::string_view MountedDataset::NameOf(uint64_t node) const {
  if (node == 0) return name();
  std::string_view path = snapshot_.manifest.entries()[node - 1].path;
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::optional<uint64_t> MountedDataset::Lookup(uint64_t node, std::string_view name) const {
  std::optional<size_t> index = DirectoryIndex(node);
  if (!index) return std::nullopt;
  // A name without the prefix all children share has a key that fits
  // nowhere; the search then stops anywhere and the last check fails.
  const uint32_t key = NameKey(name, directories_[*index].prefix);
  // The children of `node` sit in children_ in name order, so their keys
  // are in order too: a binary search over their positions finds the first
  // that is not before `name`. Written out, not std::ranges::partition_point
  // over std::views::iota, because clang 14 rejects libstdc++ 12's iota_view.
  const uint64_t end = directories_[*index + 1].first_child;
  uint64_t low = directories_[*index].first_child;
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
    StatDirectory(entry->mtime_ns, ShownMode(*entry), out);
    out->st_size = static_cast<off_t>(entry->size);
  } else {
    *out = {};
    out->st_mode =
        (entry->type == EntryType::kSymlink ? S_IFLNK : S_IFREG) | (ShownMode(*entry) & 07777);
    out->st_size = static_cast<off_t>(
        entry->type == EntryType::kSymlink ? entry->symlink_target().size() : entry->size);
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
  out->st_blocks =
      entry != nullptr ? static_cast<blkcnt_t>(entry->blocks()) : (out->st_size + 511) / 512;
  out->st_ino = InodeOf(node);
  out->st_blksize = kPreferredIoBytes;
}

InodeTable::InodeTable(Options options) : options_(std::move(options)) {}

InodeTable::Node InodeTable::Resolve(uint64_t inode) {
  const uint64_t slot_plus_one = inode >> 40;
  if (slot_plus_one == 0) return {};
  const uint64_t node = inode & ((uint64_t{1} << 40) - 1);
  std::shared_ptr<Slot> slot;
  {
    ReaderMutexLock lock(&mutex_);
    auto found = slots_.find(static_cast<uint32_t>(slot_plus_one - 1));
    if (found == slots_.end()) return {};
    slot = found->second;
  }
  absl::StatusOr<std::shared_ptr<const MountedDataset>> dataset = Loaded(slot);
  if (!dataset.ok() || node >= (*dataset)->node_count()) return {};
  return {*std::move(dataset), node};
}

absl::StatusOr<std::shared_ptr<const MountedDataset>> InodeTable::FindDataset(
    std::string_view name) {
  std::shared_ptr<Slot> slot;
  {
    ReaderMutexLock lock(&mutex_);
    auto it = root_.find(name);
    if (it == root_.end())
      return absl::NotFoundError(absl::StrCat("no dataset '", std::string(name), "'"));
    slot = it->second;
  }
  return Loaded(slot);
}

void InodeTable::Touch(Slot& slot) {
  // Stored only when the coarse clock moved: FUSE workers resolving inodes
  // of one version would otherwise all write its cache line.
  const int64_t now = CoarseNowNs();
  if (slot.last_used_ns.load(std::memory_order_relaxed) != now) {
    slot.last_used_ns.store(now, std::memory_order_relaxed);
  }
}

absl::StatusOr<std::shared_ptr<const MountedDataset>> InodeTable::Loaded(
    const std::shared_ptr<Slot>& slot) {
  {
    ReaderMutexLock lock(&mutex_);
    if (slot->loaded != nullptr) {
      Touch(*slot);
      return slot->loaded;
    }
  }
  MutexLock load_lock(&slot->load_mutex);
  {
    ReaderMutexLock lock(&mutex_);
    if (slot->loaded != nullptr) return slot->loaded;
  }
  absl::StatusOr<DatasetSnapshot> snapshot = LoadWaitingForTheServer(slot->name, slot->version);
  if (snapshot.ok() && snapshot->manifest.version() != slot->version) {
    snapshot = absl::DataLossError(
        absl::StrCat("the server sent version ", FormatVersion(snapshot->manifest.version())));
  }
  if (!snapshot.ok()) {
    if (!slot->load_failure_logged) {
      slot->load_failure_logged = true;
      GRANARY_LOG(ERROR) << "cannot mount dataset '" << slot->name << "' version "
                         << FormatVersion(slot->version) << ": " << snapshot.status();
    }
    return snapshot.status();
  }
  // Building the directory structure of a large manifest takes a while:
  // other versions are resolved meanwhile.
  auto dataset = std::make_shared<const MountedDataset>(slot->number, *std::move(snapshot));
  GRANARY_LOG(INFO) << "loaded dataset '" << slot->name << "' version "
                    << FormatVersion(slot->version) << " ("
                    << dataset->snapshot().manifest.entries().size() << " entries, "
                    << dataset->memory_bytes() << " bytes)";
  std::vector<std::shared_ptr<const MountedDataset>> freed;
  {
    WriterMutexLock lock(&mutex_);
    InstallLocked(*slot, dataset, &freed);
  }
  Free(std::move(freed));
  return dataset;
}

absl::StatusOr<DatasetSnapshot> InodeTable::LoadWaitingForTheServer(std::string_view name,
                                                                    uint64_t version) {
  constexpr std::chrono::milliseconds kRetryInterval{100};
  const auto deadline = std::chrono::steady_clock::now() + options_.unavailable_wait;
  for (;;) {
    absl::StatusOr<DatasetSnapshot> snapshot = options_.load(name, version);
    if (!ServerDownOrStopping(snapshot.status()) ||
        std::chrono::steady_clock::now() + kRetryInterval > deadline) {
      return snapshot;
    }
    std::this_thread::sleep_for(kRetryInterval);
  }
}

void InodeTable::InstallLocked(Slot& slot, std::shared_ptr<const MountedDataset> dataset,
                               std::vector<std::shared_ptr<const MountedDataset>>* freed) {
  Touch(slot);
  slot.total_bytes = dataset->snapshot().manifest.total_bytes();
  loaded_bytes_ += dataset->memory_bytes();
  slot.loaded = std::move(dataset);
  DropOverBudgetLocked(freed);
}

void InodeTable::Free(std::vector<std::shared_ptr<const MountedDataset>> freed) {
  if (freed.empty()) return;
  freed.clear();
  // A manifest is many small allocations below the heap's top: without
  // this, the process keeps their pages (main.cc has the heap keep chunk
  // buffers: KeepLargeBuffersInTheHeap).
  malloc_trim(0);
}

void InodeTable::DropOverBudgetLocked(std::vector<std::shared_ptr<const MountedDataset>>* freed) {
  // Every reference to a version outside the table was copied from one the
  // table handed out under `mutex_`, so with the lock held exclusively, a
  // count of one means that nothing holds it and nothing can take it anew.
  while (loaded_bytes_ > options_.memory_budget) {
    Slot* oldest = nullptr;
    for (const auto& [number, slot] : slots_) {
      if (slot->loaded == nullptr || slot->loaded.use_count() != 1) continue;
      if (oldest == nullptr || slot->last_used_ns.load(std::memory_order_relaxed) <
                                   oldest->last_used_ns.load(std::memory_order_relaxed)) {
        oldest = slot.get();
      }
    }
    if (oldest == nullptr) return;
    UnloadLocked(*oldest, freed);
  }
}

void InodeTable::UnloadLocked(Slot& slot,
                              std::vector<std::shared_ptr<const MountedDataset>>* freed) {
  if (slot.loaded == nullptr) return;
  loaded_bytes_ -= slot.loaded->memory_bytes();
  freed->push_back(std::move(slot.loaded));
}

std::vector<InodeTable::Listed> InodeTable::ListDatasets() const {
  ReaderMutexLock lock(&mutex_);
  std::vector<Listed> out;
  out.reserve(root_.size());
  for (const auto& [name, slot] : root_) {
    out.push_back({name, InodeNumber(slot->number, 0), slot->total_bytes, slot->loaded});
  }
  return out;
}

InodeTable::Slot* InodeTable::FindSlotLocked(std::string_view name, uint64_t version) const {
  for (const auto& [number, slot] : slots_) {
    if (slot->name == name && slot->version == version) return slot.get();
  }
  return nullptr;
}

bool InodeTable::HasVersion(std::string_view name, uint64_t version) const {
  ReaderMutexLock lock(&mutex_);
  return FindSlotLocked(name, version) != nullptr;
}

bool InodeTable::IsLoaded(std::string_view name) const {
  ReaderMutexLock lock(&mutex_);
  return std::any_of(slots_.begin(), slots_.end(), [&](const auto& entry) {
    return entry.second->name == name && entry.second->loaded != nullptr;
  });
}

std::optional<uint32_t> InodeTable::ShownSlot(std::string_view name) const {
  ReaderMutexLock lock(&mutex_);
  auto it = root_.find(name);
  if (it == root_.end()) return std::nullopt;
  return it->second->number;
}

std::shared_ptr<InodeTable::Slot> InodeTable::NewSlotLocked(uint32_t number, std::string name,
                                                            uint64_t version) {
  auto slot = std::make_shared<Slot>(number, std::move(name), version);
  slots_.insert_or_assign(number, slot);
  return slot;
}

uint32_t InodeTable::Show(const v1::DatasetInfo& info, std::optional<DatasetSnapshot> snapshot) {
  MutexLock add_lock(&add_mutex_);
  {
    WriterMutexLock lock(&mutex_);
    if (Slot* slot = FindSlotLocked(info.name(), info.version()); slot != nullptr) {
      slot->total_bytes = info.total_bytes();  // Unknown to a slot adopted and never loaded.
      return slot->number;
    }
  }
  const uint32_t number = next_slot_++;
  // Built before the lock is taken: a large manifest takes a while.
  std::shared_ptr<const MountedDataset> dataset =
      snapshot ? std::make_shared<const MountedDataset>(number, *std::move(snapshot)) : nullptr;
  std::vector<std::shared_ptr<const MountedDataset>> freed;
  {
    WriterMutexLock lock(&mutex_);
    std::shared_ptr<Slot> slot = NewSlotLocked(number, info.name(), info.version());
    slot->total_bytes = info.total_bytes();
    if (dataset != nullptr) InstallLocked(*slot, std::move(dataset), &freed);
  }
  Free(std::move(freed));
  if (journal_ != nullptr) journal_->SlotAdded(number, info.name(), info.version());
  return number;
}

void InodeTable::Publish(const std::vector<uint32_t>& slots) {
  std::map<std::string, std::shared_ptr<Slot>, std::less<>> root;
  const Clock::time_point now = Clock::now();
  WriterMutexLock lock(&mutex_);
  for (uint32_t number : slots) {
    auto slot = slots_.find(number);
    if (slot != slots_.end()) root.emplace(slot->second->name, slot->second);
  }
  root_ = std::move(root);
  for (auto& [number, slot] : slots_) {
    auto listed = root_.find(slot->name);
    if (listed != root_.end() && listed->second == slot) {
      slot->retired_at.reset();
    } else if (!slot->retired_at) {
      slot->retired_at = now;
    }
  }
}

void InodeTable::Adopt(uint32_t slot, std::string dataset, uint64_t version) {
  MutexLock add_lock(&add_mutex_);
  WriterMutexLock lock(&mutex_);
  NewSlotLocked(slot, std::move(dataset), version)->retired_at = Clock::now();
  next_slot_ = std::max(next_slot_, slot + 1);
}

void InodeTable::SkipSlotsBelow(uint32_t next_slot) {
  MutexLock add_lock(&add_mutex_);
  next_slot_ = std::max(next_slot_, next_slot);
}

bool InodeTable::HasSlot(uint32_t slot) const {
  ReaderMutexLock lock(&mutex_);
  return slots_.contains(slot);
}

std::vector<InodeTable::Released> InodeTable::ReleaseUnused() {
  std::vector<Released> released;
  std::vector<uint32_t> numbers;
  std::vector<std::shared_ptr<const MountedDataset>> freed;
  const Clock::time_point now = Clock::now();
  {
    WriterMutexLock lock(&mutex_);
    for (auto it = slots_.begin(); it != slots_.end();) {
      Slot& slot = *it->second;
      if (!slot.retired_at || now - *slot.retired_at < options_.release_after ||
          (slot.loaded != nullptr && slot.loaded.use_count() != 1)) {
        ++it;
        continue;
      }
      released.push_back({slot.name, slot.version});
      numbers.push_back(slot.number);
      UnloadLocked(slot, &freed);
      slots_.erase(it++);
    }
    DropOverBudgetLocked(&freed);
  }
  Free(std::move(freed));
  if (journal_ != nullptr) {
    for (uint32_t number : numbers) journal_->SlotReleased(number);
  }
  return released;
}

std::vector<uint64_t> InodeTable::KeptVersions() const {
  ReaderMutexLock lock(&mutex_);
  std::vector<uint64_t> versions;
  versions.reserve(slots_.size());
  for (const auto& [number, slot] : slots_) versions.push_back(slot->version);
  return versions;
}

InodeTable::MemoryUse InodeTable::memory_use() const {
  ReaderMutexLock lock(&mutex_);
  MemoryUse use;
  use.bytes = loaded_bytes_;
  for (const auto& [number, slot] : slots_) use.versions += slot->loaded != nullptr;
  return use;
}

void InodeTable::StatRoot(struct stat* out) const {
  StatDirectory(kMountTimeNs, 0555, out);
  out->st_ino = kRootInode;
  out->st_blksize = kPreferredIoBytes;
  out->st_uid = options_.uid;
  out->st_gid = options_.gid;
}

}  // namespace granary::fuse
