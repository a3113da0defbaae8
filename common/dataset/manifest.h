// A Manifest is the immutable snapshot of a dataset's source taken when it was
// registered or refreshed: every regular file, directory and in-tree symlink
// with its path, size, mode, owner, link count, mtime, user.* extended
// attributes, ACLs (common/dataset/posix_acl.h) and identity (device, inode, ctime). Paths and link
// targets are bytes, as Linux names are. Entries are sorted by path; an entry's index is its file
// id, which chunk keys name. The version is an XXH3-64 hash of the dataset's identity (name,
// source, chunk size) and every entry, so equal content gives an equal version and any change gives
// a new one.
//
// Files of one device and inode are hard links: the first by path is the
// file whose chunks hold their bytes (CanonicalFileId) and the mount shows
// them as one inode; the others are counted in file_count() but not in
// total_bytes() or chunk_count(), as du counts them.
//
// Thread-safety: immutable after Build(); safe to share across threads.
#ifndef GRANARY_COMMON_DATASET_MANIFEST_H_
#define GRANARY_COMMON_DATASET_MANIFEST_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/huge_page_allocator.h"

namespace granary {

namespace v1 {
class ManifestEntry;
}  // namespace v1

enum class EntryType : uint8_t { kFile = 1, kDirectory = 2, kSymlink = 3 };

struct ExtendedAttribute {
  std::string name;  // With its namespace: "user.origin".
  std::string value;
  friend bool operator==(const ExtendedAttribute&, const ExtendedAttribute&) = default;
};

// An entry of the source that a dataset does not show, and why (a symlink
// leaving the source, a device or FIFO): `granary dataset show` lists them,
// so that nothing is dropped silently.
struct SkippedEntry {
  std::string path;
  std::string reason;
};

// What a scan left out: the first kMaxListed entries, and how many in all.
struct SkippedEntries {
  static constexpr size_t kMaxListed = 100;
  std::vector<SkippedEntry> listed;
  uint64_t count = 0;

  void Add(std::string path, std::string reason);
};

// What few entries have, kept out of line: a symlink's target, an object's
// ETag, extended attributes. Inline, their two strings and a vector took 88
// bytes of every entry of a manifest, most of it, since most entries have none.
struct EntryExtras {
  std::string symlink_target;
  std::string etag;
  std::vector<ExtendedAttribute> xattrs;  // Sorted by name.
};

// An entry's EntryExtras on the heap, or none; a copy copies them.
class EntryExtrasBox {
 public:
  EntryExtrasBox() = default;
  EntryExtrasBox(const EntryExtrasBox& other);
  EntryExtrasBox& operator=(const EntryExtrasBox& other);
  EntryExtrasBox(EntryExtrasBox&&) noexcept = default;
  EntryExtrasBox& operator=(EntryExtrasBox&&) noexcept = default;

  // Null when there are none.
  const EntryExtras* get() const { return extras_.get(); }
  EntryExtras& GetOrCreate();

 private:
  std::unique_ptr<EntryExtras> extras_;
};

// Fields are ordered by size so that a manifest of ten million entries pays
// no padding.
struct ManifestEntry {
  std::string path;  // Relative, '/'-separated, no leading slash; "" is the root.
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  // Identity in the source at scan time (st_dev, st_ino, st_ctim; the device
  // through device() and set_device()). An inode of 0 is unknown (object
  // stores): such entries are never hard links.
  uint64_t inode = 0;
  int64_t ctime_ns = 0;
  uint32_t mode = 0;  // st_mode: type and permission bits.
  // The source's owner; with `mode`, who may read the entry.
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t nlink = 1;  // st_nlink in the source.

 private:
  // The kernel's own 32-bit form of st_dev (12 bits of major, 20 of minor):
  // a 64-bit field would cost 8 bytes of every entry, padding included.
  uint32_t device_ = 0;

 public:
  EntryType type = EntryType::kFile;

 private:
  // The source allocates the entry whole units of 2^allocation_shift_ bytes
  // (a file of 100 bytes takes 4 KiB on most filesystems); 0 when unknown,
  // kNothingAllocated when it takes no block (a short symlink, inline data).
  // A byte in padding the fields above leave, where st_blocks would cost 8.
  uint8_t allocation_shift_ = 0;

 public:
  // st_dev as stat() returns it.
  uint64_t device() const;
  // False, changing nothing, when `device` is no Linux device number (a major
  // of 4096 or more, or a minor of 2^20 or more): stat() never returns one.
  [[nodiscard]] bool set_device(uint64_t device);
  // st_blocks as the source had it (512-byte units), so that du and ls -s
  // count as over the source; from the size where unknown (object stores).
  uint64_t blocks() const;
  // The source's st_blocks of an entry whose size is already set. Kept when
  // it is 0 or the size rounded up to whole units of 512 bytes to 1 MiB;
  // other counts (partly sparse or preallocated files) leave blocks() counted
  // from the size.
  void set_blocks(uint64_t blocks);
  // Empty when the entry has none.
  const std::string& symlink_target() const;
  const std::string& etag() const;
  const std::vector<ExtendedAttribute>& xattrs() const;  // Sorted by name.
  // Setting an empty value to an entry without extras allocates nothing.
  void set_symlink_target(std::string target);
  void set_etag(std::string etag);
  void set_xattrs(std::vector<ExtendedAttribute> xattrs);
  // The heap bytes the entry points to, which memory budgets count.
  uint64_t heap_bytes() const;

  void ToProto(v1::ManifestEntry* out) const;
  // Fails with INVALID_ARGUMENT on an unknown entry type or a path that is not
  // clean. Takes `entry` by value so that a caller done with it can move its
  // strings in.
  static absl::StatusOr<ManifestEntry> FromProto(v1::ManifestEntry entry);

 private:
  const EntryExtras& extras() const;

  EntryExtrasBox extras_;
};

// No manifest holds more entries: granaryd's max_dataset_entries cannot be
// set higher, readers refuse to load a larger one, and the mount counts a
// dataset's nodes in 32 bits.
inline constexpr uint64_t kMaxManifestEntries = 1'000'000'000;

// A manifest's entries. A million of them take over 100 MiB, which huge pages
// fill with a few hundred page faults instead of tens of thousands (the larger
// part of the time to load a manifest) and look up with fewer TLB misses.
using ManifestEntries = std::vector<ManifestEntry, HugePageAllocator<ManifestEntry>>;

struct DatasetIdentity {
  std::string name;
  std::string source;
  uint32_t chunk_size = 0;
};

class Manifest {
 public:
  // Sorts `entries` by path (unless they already are), finds hard links and
  // computes the version. Fails with INVALID_ARGUMENT on a duplicate or
  // unclean path, or a file of more than 2^32 chunks. `skipped` is what the
  // scan left out: it is described with the manifest but not part of its
  // version, and manifests loaded back from a catalog do not carry it (its
  // record does).
  static absl::StatusOr<Manifest> Build(DatasetIdentity identity, ManifestEntries entries,
                                        SkippedEntries skipped = {});

  const DatasetIdentity& identity() const { return identity_; }
  uint64_t version() const { return version_; }
  uint32_t chunk_size() const { return identity_.chunk_size; }
  const ManifestEntries& entries() const { return entries_; }

  // The file id of `path` (a clean relative path), if the manifest has it.
  std::optional<uint64_t> Find(std::string_view path) const;

  // The id whose chunks hold the bytes of file `id`: the first path of its
  // hard-link group, or `id` itself.
  uint64_t CanonicalFileId(uint64_t id) const;
  // Whether file `id` is a later name of a file listed earlier.
  bool IsHardLinkAlias(uint64_t id) const { return CanonicalFileId(id) != id; }

  const SkippedEntries& skipped() const { return skipped_; }

  uint64_t file_count() const { return file_count_; }
  uint64_t directory_count() const { return directory_count_; }
  uint64_t total_bytes() const { return total_bytes_; }
  uint64_t chunk_count() const { return chunk_count_; }

  // The bytes this manifest holds in memory: its entries and what they
  // point to. What memory budgets for manifests count.
  uint64_t memory_bytes() const { return memory_bytes_; }

 private:
  Manifest() = default;

  DatasetIdentity identity_;
  ManifestEntries entries_;
  // (alias id, canonical id), sorted: hard links are few, so a table of
  // them costs less than a field in every entry.
  std::vector<std::pair<uint64_t, uint64_t>> hard_link_aliases_;
  SkippedEntries skipped_;
  uint64_t version_ = 0;
  uint64_t file_count_ = 0;
  uint64_t directory_count_ = 0;
  uint64_t total_bytes_ = 0;
  uint64_t chunk_count_ = 0;
  uint64_t memory_bytes_ = 0;
};

// Validates a path inside a dataset and returns its clean form: no leading or
// trailing '/', no empty, "." or ".." components. "" and "/" are the root.
// Fails with INVALID_ARGUMENT naming the path otherwise (".." would escape the
// source; an absolute path would name another tree).
absl::StatusOr<std::string> CleanDatasetPath(std::string_view path);
// Whether `path` is already clean: CleanDatasetPath would return it unchanged.
bool IsCleanDatasetPath(std::string_view path);
// The directory holding the entry at clean path `path`: "" (the root) for an
// entry of the root.
std::string_view ParentPath(std::string_view path);
// Whether the entry at clean path `path` lies below directory `directory`.
bool IsBelow(std::string_view path, std::string_view directory);

}  // namespace granary

#endif  // GRANARY_COMMON_DATASET_MANIFEST_H_
