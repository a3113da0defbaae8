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
// version gets a new slot (new inodes). A version no longer published is
// retired; it is released (its slot and manifest dropped) by ReleaseUnused()
// once it has been retired for `release_after` and nothing holds it: open
// files and directories hold their version (OpenFile and the directory
// handles of fuse_ops.cc keep a reference), and so does every request
// resolving one of its inodes. Kernel lookups do not hold a version:
// the kernel keeps entries for a day, and a tree it walked would otherwise
// stay in memory until unmount; its cached names of a released version then
// answer ESTALE when opened or listed.
//
// Thread-safety: every method may be called concurrently.
#ifndef GRANARY_FUSE_CLIENT_INODE_TABLE_H_
#define GRANARY_FUSE_CLIENT_INODE_TABLE_H_

#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "client/dataset_client.h"
#include "common/huge_page_allocator.h"
#include "common/mutex.h"

namespace granary::fuse {

inline constexpr uint64_t kRootInode = 1;

// One version of one dataset with the directory structure of its manifest.
// Immutable once built.
class MountedDataset {
 public:
  MountedDataset(uint32_t slot, DatasetSnapshot snapshot);

  uint32_t slot() const { return slot_; }
  const DatasetSnapshot& snapshot() const { return snapshot_; }
  const std::string& name() const { return snapshot_.info.name(); }
  uint64_t node_count() const { return child_begin_.size() - 1; }

  uint64_t InodeOf(uint64_t node) const { return (uint64_t{slot_} + 1) << 40 | node; }
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
  std::span<const uint64_t> Children(uint64_t node) const;
  // The last path component of `node`.
  std::string_view NameOf(uint64_t node) const;

  // The attributes of `node` as the source had them: type, mode, owner
  // (uid, gid), link count, size and mtime from its manifest entry. The kernel checks
  // access against them (the mount has default_permissions). A dataset root
  // the manifest does not list shows as root's, mode 0555.
  void Stat(uint64_t node, struct stat* out) const;

 private:
  uint32_t slot_;
  DatasetSnapshot snapshot_;
  bool manifest_has_root_ = false;
  // Per node, into children_; one extra at the end. Huge pages, like the
  // manifest's: a lookup in a large directory touches a few of them at random.
  std::vector<uint64_t, HugePageAllocator<uint64_t>> child_begin_;
  std::vector<uint64_t, HugePageAllocator<uint64_t>> children_;
  // Per child, the first 8 bytes of its name as a big-endian number: a lookup
  // searches these, 8 children to a cache line, and reads a manifest entry
  // (a cache miss each) only where names share those bytes and to confirm.
  std::vector<uint64_t, HugePageAllocator<uint64_t>> child_keys_;
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

class InodeTable {
 public:
  // `uid` and `gid` own the mount root; everything in a dataset has its
  // source's owner. A retired version is released no sooner than
  // `release_after` after it left the root.
  InodeTable(uid_t uid, gid_t gid, std::chrono::milliseconds release_after)
      : uid_(uid), gid_(gid), release_after_(release_after) {}

  // The dataset version behind `inode` and the node inside it; nullptr for the
  // mount root, unknown inodes and inodes of released versions.
  struct Node {
    std::shared_ptr<const MountedDataset> dataset;
    uint64_t node = 0;
  };
  Node Resolve(uint64_t inode) const;

  // The datasets currently listed in the root, by name.
  std::shared_ptr<const MountedDataset> FindDataset(std::string_view name) const;
  std::vector<std::shared_ptr<const MountedDataset>> ListDatasets() const;
  // The mounted version of `name` if it is `version` and not released.
  std::shared_ptr<const MountedDataset> FindVersion(std::string_view name, uint64_t version) const;

  // Makes the root list exactly `datasets` (each either returned by
  // FindVersion or built by Add); versions it no longer lists are retired,
  // and retired ones it lists again are not.
  void Publish(std::vector<std::shared_ptr<const MountedDataset>> datasets);
  // Gives `snapshot` a new slot; it shows in the root once published.
  std::shared_ptr<const MountedDataset> Add(DatasetSnapshot snapshot);

  // Taking a mount over from another process: gives `snapshot` the `slot`
  // that process numbered it with (retired until published), and numbers
  // later versions from `next_slot` on. Before the first Add().
  std::shared_ptr<const MountedDataset> Adopt(uint32_t slot, DatasetSnapshot snapshot);
  void SkipSlotsBelow(uint32_t next_slot);
  // Whether `slot` is in the table.
  bool HasSlot(uint32_t slot) const;
  // Slots added or released from now on are recorded in `journal`, which
  // must outlive the table.
  void set_journal(SlotJournal* journal) { journal_ = journal; }

  // Releases every version retired at least `release_after` ago that nothing
  // holds; returns them (the last references, for the caller to log and drop).
  std::vector<std::shared_ptr<const MountedDataset>> ReleaseUnused();
  // The versions not released: published, or retired and still held or
  // within `release_after`. granaryd keeps them for this mount (UseReporter).
  std::vector<uint64_t> KeptVersions() const;

  void StatRoot(struct stat* out) const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Slot {
    std::shared_ptr<const MountedDataset> dataset;
    // When it left the root; unset while it is listed there (or about to be:
    // Add() comes before Publish()).
    std::optional<Clock::time_point> retired_at;
  };

  const uid_t uid_;
  const gid_t gid_;
  const std::chrono::milliseconds release_after_;
  SlotJournal* journal_ = nullptr;
  Mutex add_mutex_;  // Serialises Add().
  uint32_t next_slot_ ABSL_GUARDED_BY(add_mutex_) = 0;
  mutable SharedMutex mutex_;
  // Versions not released, by slot.
  absl::flat_hash_map<uint32_t, Slot> slots_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, std::shared_ptr<const MountedDataset>, std::less<>> root_
      ABSL_GUARDED_BY(mutex_);
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_INODE_TABLE_H_
