// InodeTable numbers and names everything a granary-fuse mount shows: the
// mount root, one directory per dataset, and every entry of each dataset's
// manifest. Inode numbers are computed, not allocated: the mount root is 1,
// and node n of the dataset version in slot s (slots are handed out in order
// of first appearance and never reused) is ((s + 1) << 40) | n, where node 0
// is the dataset's root and node i + 1 is manifest entry i. So an inode
// number names one entry of one version for the life of the mount, and FORGET
// needs no bookkeeping: a number whose version was released resolves to
// nothing (ESTALE), never to another entry. Across processes too: a
// granary-fuse taking a mount over numbers the versions of the one before
// as it did (Adopt(), from the journal of SlotJournal) and new ones above.
//
// The root lists the datasets last published; a dataset refreshed to a new
// version gets a new slot (new inodes). A slot's manifest is loaded when one
// of its inodes is first resolved, not when it is published: a mount of a
// thousand datasets holds in memory only those being read. Loaded versions
// beyond the memory budget are dropped again, least recently used first,
// once nothing holds them; their inode numbers stay valid (they are computed
// from the manifest, which a version never changes) and load it again. A
// load that finds the server unreachable (or stopping) is tried again for up
// to `unavailable_wait`: a first open of a dataset while the mount's granaryd
// restarts waits for it rather than failing (granary-fuse's loader also asks
// the other members, which hold the same catalog).
//
// A version no longer published is retired; it is released (its slot and
// manifest dropped) by ReleaseUnused() once it has been retired for
// `release_after` and nothing holds it: open files and directories hold
// their version (OpenFile and the directory handles of fuse_ops.cc keep a
// reference), and so does every request resolving one of its inodes. Kernel
// lookups do not hold a version: the kernel keeps entries for a day, and a
// tree it walked would otherwise stay in memory until unmount; its cached
// names of a released version then answer ESTALE when opened or listed.
//
// Thread-safety: every method may be called concurrently. Resolve() and
// FindDataset() may wait for a manifest to load; loads of one version are
// made once, loads of different versions in parallel.
#ifndef GRANARY_FUSE_CLIENT_OPERATIONS_INODE_TABLE_H_
#define GRANARY_FUSE_CLIENT_OPERATIONS_INODE_TABLE_H_

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "client/dataset_client.h"
#include "common/base/huge_page_allocator.h"
#include "common/base/mutex.h"

namespace granary::fuse {

inline constexpr uint64_t kRootInode = 1;

// The inode number of node `node` of the version in slot `slot`.
inline uint64_t InodeNumber(uint32_t slot, uint64_t node) {
  return (uint64_t{slot} + 1) << 40 | node;
}

// One version of one dataset with the directory structure of its manifest.
// Immutable once built.
class MountedDataset {
 public:
  MountedDataset(uint32_t slot, DatasetSnapshot snapshot);

  uint32_t slot() const { return slot_; }
  const DatasetSnapshot& snapshot() const { return snapshot_; }
  const std::string& name() const { return snapshot_.info.name(); }
  uint64_t node_count() const { return snapshot_.manifest.entries().size() + 1; }

  uint64_t InodeOf(uint64_t node) const { return InodeNumber(slot_, node); }
  // The manifest entry of `node`, or nullptr for a dataset root the manifest
  // does not list.
  const ManifestEntry* EntryOf(uint64_t node) const;
  // The file id of `node`: its index in the manifest.
  static uint64_t FileIdOf(uint64_t node) { return node - 1; }
  // The node every hard link of `node`'s file is shown as (one inode, as in
  // the source), or `node` itself.
  uint64_t CanonicalNode(uint64_t node) const {
    return node == 0 ? 0 : snapshot_.manifest.CanonicalFileId(FileIdOf(node)) + 1;
  }

  // Child `name` of directory `node`.
  std::optional<uint64_t> Lookup(uint64_t node, std::string_view name) const;
  // The children of directory `node`, in name order.
  std::span<const uint32_t> Children(uint64_t node) const;
  // The last path component of `node`.
  std::string_view NameOf(uint64_t node) const;

  // The attributes of `node` as the source had them: type, mode, owner
  // (uid, gid), link count, size and mtime from its manifest entry. The kernel checks
  // access against them (the mount has default_permissions). A dataset root
  // the manifest does not list shows as root's, mode 0555.
  void Stat(uint64_t node, struct stat* out) const;

  // What this version holds in memory: its manifest and directory structure.
  uint64_t memory_bytes() const;

 private:
  // The position of directory `node` in directories_, if it has children.
  std::optional<size_t> DirectoryIndex(uint64_t node) const;
  // The bytes of `name` past the `prefix` bytes its directory's children all
  // begin with, as a big-endian number (zero-padded): ordered like the
  // children's names, ties aside.
  static uint32_t NameKey(std::string_view name, uint32_t prefix);

  uint32_t slot_;
  DatasetSnapshot snapshot_;
  bool manifest_has_root_ = false;
  // Nodes are counted in 32 bits: granaryd refuses a dataset of more than
  // max_dataset_entries, at most a billion. A few directories hold most
  // nodes, so what is kept per directory costs little, and what is kept per
  // node is two 32-bit numbers (ten million entries: 76 MiB).
  struct Directory {
    uint32_t node;
    uint32_t first_child;  // Into children_; the next directory's is its end.
    uint32_t prefix;       // The bytes all its children's names begin with.
  };
  // Directories with children, by node, and one past the last to end it.
  std::vector<Directory> directories_;
  // Per directory, its children in name order. Huge pages, like the
  // manifest's: a lookup in a large directory touches a few of them at random.
  std::vector<uint32_t, HugePageAllocator<uint32_t>> children_;
  // Per child, NameKey of its name: a lookup searches these, 16 children to a
  // cache line, and reads a manifest entry (a cache miss each) only where the
  // keys tie and to confirm.
  std::vector<uint32_t, HugePageAllocator<uint32_t>> child_keys_;
};

// Where an InodeTable records the slots it numbers and releases, so that a
// successor process numbers the same versions the same way (KeeperLink).
// Called without the table's locks held.
class SlotJournal {
 public:
  virtual ~SlotJournal() = default;
  virtual void SlotAdded(uint32_t slot, std::string_view dataset, uint64_t version) = 0;
  virtual void SlotReleased(uint32_t slot) = 0;
};

// Fetches the manifest of `version` of dataset `name`
// (DatasetClient::GetManifest).
using ManifestLoader =
    std::function<absl::StatusOr<DatasetSnapshot>(std::string_view name, uint64_t version)>;

class InodeTable {
 public:
  struct Options {
    // Own the mount root; everything in a dataset has its source's owner.
    uid_t uid = 0;
    gid_t gid = 0;
    // A retired version is released no sooner than this after it left the root.
    std::chrono::milliseconds release_after{0};
    // Loaded versions beyond this many bytes are dropped once nothing holds them.
    uint64_t memory_budget = uint64_t{1} << 30;
    ManifestLoader load;
    // How long a load answered UNAVAILABLE or CANCELLED is tried again
    // before it fails: longer than a granaryd takes to restart.
    std::chrono::milliseconds unavailable_wait{10000};
  };
  explicit InodeTable(Options options);

  // The dataset version behind `inode` and the node inside it, loading the
  // version if it is not in memory; nullptr for the mount root, unknown
  // inodes, inodes of released versions and of versions that cannot be
  // loaded (logged once per version).
  struct Node {
    std::shared_ptr<const MountedDataset> dataset;
    uint64_t node = 0;
  };
  Node Resolve(uint64_t inode);

  // The dataset the root lists as `name`, loaded. NOT_FOUND if the root does
  // not list it; the loader's error if it cannot be loaded.
  absl::StatusOr<std::shared_ptr<const MountedDataset>> FindDataset(std::string_view name);

  // What the root shows of a dataset without loading it.
  struct Listed {
    std::string name;
    uint64_t inode = 0;  // Of the dataset's root directory.
    uint64_t total_bytes = 0;
    std::shared_ptr<const MountedDataset> loaded;  // Null while not in memory.
  };
  // The datasets currently listed in the root, by name.
  std::vector<Listed> ListDatasets() const;

  // Whether the table has a slot for `version` of `name`.
  bool HasVersion(std::string_view name, uint64_t version) const;
  // Whether any version of `name` is in memory: the dataset is being read.
  bool IsLoaded(std::string_view name) const;
  // The slot the root lists as `name`.
  std::optional<uint32_t> ShownSlot(std::string_view name) const;
  // The slot of `info`'s version: the one the table has, or a new one
  // (journaled), holding `snapshot` when given, loaded on first use
  // otherwise. It shows in the root once published.
  uint32_t Show(const v1::DatasetInfo& info, std::optional<DatasetSnapshot> snapshot = {});
  // Makes the root list exactly the versions of `slots` (from Show());
  // versions it no longer lists are retired, and retired ones it lists again
  // are not.
  void Publish(const std::vector<uint32_t>& slots);

  // Taking a mount over from another process: gives `version` of `dataset`
  // the `slot` that process numbered it with (retired until published, loaded
  // on first use), and numbers later versions from `next_slot` on. Before the
  // first Show().
  void Adopt(uint32_t slot, std::string dataset, uint64_t version);
  void SkipSlotsBelow(uint32_t next_slot);
  // Whether `slot` is in the table.
  bool HasSlot(uint32_t slot) const;
  // Slots added or released from now on are recorded in `journal`, which
  // must outlive the table.
  void set_journal(SlotJournal* journal) { journal_ = journal; }

  // Releases every version retired at least `release_after` ago that nothing
  // holds, and drops loaded versions beyond the memory budget that nothing
  // holds; returns the versions released.
  struct Released {
    std::string name;
    uint64_t version = 0;
  };
  std::vector<Released> ReleaseUnused();
  // The versions not released: published, or retired and still held or
  // within `release_after`. granaryd keeps them for this mount (UseReporter).
  std::vector<uint64_t> KeptVersions() const;

  // The loaded versions and the bytes they hold.
  struct MemoryUse {
    uint64_t bytes = 0;
    size_t versions = 0;
  };
  MemoryUse memory_use() const;

  void StatRoot(struct stat* out) const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Slot {
    Slot(uint32_t number, std::string name, uint64_t version)
        : number(number), name(std::move(name)), version(version) {}
    const uint32_t number;
    const std::string name;
    const uint64_t version;
    uint64_t total_bytes = 0;
    // Null while not in memory.
    std::shared_ptr<const MountedDataset> loaded;
    // When it left the root; unset while it is listed there (or about to be:
    // Show() comes before Publish()).
    std::optional<Clock::time_point> retired_at;
    // Coarse monotonic nanoseconds of the last resolve: which to drop first.
    std::atomic<int64_t> last_used_ns{0};
    // Held while loading, so that one version is loaded once.
    Mutex load_mutex;
    bool load_failure_logged ABSL_GUARDED_BY(load_mutex) = false;
  };

  // The slot's version, now the most recently used, loaded first if it is
  // not in memory.
  absl::StatusOr<std::shared_ptr<const MountedDataset>> Loaded(const std::shared_ptr<Slot>& slot);
  // options_.load, tried again while it answers UNAVAILABLE or CANCELLED, for up to
  // options_.unavailable_wait.
  absl::StatusOr<DatasetSnapshot> LoadWaitingForTheServer(std::string_view name, uint64_t version);
  // Marks the slot's version used now.
  static void Touch(Slot& slot);
  Slot* FindSlotLocked(std::string_view name, uint64_t version) const
      ABSL_SHARED_LOCKS_REQUIRED(mutex_);
  // Installs `dataset` as the loaded version of `slot` and drops what the
  // budget no longer allows.
  // The versions dropped are added to `freed`, for Free() once the lock is
  // released: freeing a large manifest takes a while.
  void InstallLocked(Slot& slot, std::shared_ptr<const MountedDataset> dataset,
                     std::vector<std::shared_ptr<const MountedDataset>>* freed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void DropOverBudgetLocked(std::vector<std::shared_ptr<const MountedDataset>>* freed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Takes the slot's version, if loaded, out of memory into `freed`.
  void UnloadLocked(Slot& slot, std::vector<std::shared_ptr<const MountedDataset>>* freed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Drops the last references to `freed` and returns their memory to the system.
  static void Free(std::vector<std::shared_ptr<const MountedDataset>> freed);
  std::shared_ptr<Slot> NewSlotLocked(uint32_t number, std::string name, uint64_t version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const Options options_;
  SlotJournal* journal_ = nullptr;
  Mutex add_mutex_;  // Serialises Show() and Adopt().
  uint32_t next_slot_ ABSL_GUARDED_BY(add_mutex_) = 0;
  mutable SharedMutex mutex_;
  // Versions not released, by slot.
  absl::flat_hash_map<uint32_t, std::shared_ptr<Slot>> slots_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, std::shared_ptr<Slot>, std::less<>> root_ ABSL_GUARDED_BY(mutex_);
  uint64_t loaded_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_OPERATIONS_INODE_TABLE_H_
