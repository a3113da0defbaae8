#include "common/dataset/manifest.h"

#include <sys/sysmacros.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/absl_compat.h"
#include "common/dataset/chunk_math.h"
#include "common/dataset/hash.h"
#include "proto/granary.pb.h"

namespace granary {
namespace {

constexpr size_t kHashBlockBytes = 64 << 10;

// The version hash's encoding of a field: integers as 8 little-endian bytes,
// strings as their bytes and then their length.
void AppendU64(uint64_t value, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(value >> (8 * i)));
}

void AppendBytes(std::string_view bytes, std::string* out) {
  out->append(bytes);
  AppendU64(bytes.size(), out);
}

// Sorts through a table of positions, then moves the entries into place one
// cycle of the permutation at a time: each entry moves once, and no second
// array of entries is needed, which at ten million entries would be another
// gigabyte at the peak of a registration. (Swapping the entries themselves
// would move a string per swap.)
void SortByPath(ManifestEntries& entries) {
  // Build() takes at most kMaxManifestEntries, which 32 bits count.
  std::vector<uint32_t> source_of(entries.size());
  std::iota(source_of.begin(), source_of.end(), 0u);
  std::sort(source_of.begin(), source_of.end(),
            [&](uint32_t a, uint32_t b) { return entries[a].path < entries[b].path; });
  for (uint32_t start = 0; start < source_of.size(); ++start) {
    if (source_of[start] == start) continue;
    ManifestEntry displaced = std::move(entries[start]);
    uint32_t at = start;
    while (source_of[at] != start) {
      const uint32_t from = source_of[at];
      entries[at] = std::move(entries[from]);
      source_of[at] = at;
      at = from;
    }
    entries[at] = std::move(displaced);
    source_of[at] = at;
  }
}

bool ByName(const ExtendedAttribute& a, const ExtendedAttribute& b) { return a.name < b.name; }

// Link counts and extended attributes enter the hash only where an entry has
// them, so that versions of manifests recorded before they were kept, and of
// entries without them, stay what they were.
void AppendLinksAndAttributes(const ManifestEntry& entry, std::string* out) {
  const std::vector<ExtendedAttribute>& xattrs = entry.xattrs();
  if (entry.nlink <= 1 && xattrs.empty()) return;
  AppendU64(entry.nlink, out);
  AppendU64(xattrs.size(), out);
  for (const ExtendedAttribute& xattr : xattrs) {
    AppendBytes(xattr.name, out);
    AppendBytes(xattr.value, out);
  }
}

// (alias, canonical) for every file that shares its device and inode with
// one earlier by path.
std::vector<std::pair<uint64_t, uint64_t>> FindHardLinks(const ManifestEntries& entries) {
  std::vector<uint64_t> linked;
  for (uint64_t i = 0; i < entries.size(); ++i) {
    const ManifestEntry& entry = entries[i];
    if (entry.type == EntryType::kFile && entry.nlink > 1 && entry.inode != 0) linked.push_back(i);
  }
  auto identity = [&](uint64_t id) { return std::pair(entries[id].device(), entries[id].inode); };
  // Stable, so each group keeps path order and its first is the canonical one.
  std::stable_sort(linked.begin(), linked.end(),
                   [&](uint64_t a, uint64_t b) { return identity(a) < identity(b); });
  std::vector<std::pair<uint64_t, uint64_t>> aliases;
  for (size_t begin = 0, end; begin < linked.size(); begin = end) {
    for (end = begin + 1; end < linked.size() && identity(linked[end]) == identity(linked[begin]);
         ++end) {
      aliases.emplace_back(linked[end], linked[begin]);
    }
  }
  std::sort(aliases.begin(), aliases.end());
  return aliases;
}

// What an allocation of `bytes` takes from the heap: glibc's malloc adds 8
// bytes and rounds up to 16, 32 at least, so a 37-byte path takes 48, and a
// budget that counted 38 ran 7% under the resident memory.
uint64_t AllocatedBytes(uint64_t bytes) { return std::max<uint64_t>(32, (bytes + 8 + 15) & ~15); }

// The heap bytes a string holds beyond itself: none while it fits in place.
uint64_t HeapBytesOf(const std::string& text) {
  static const size_t kInPlace = std::string().capacity();
  return text.capacity() > kInPlace ? AllocatedBytes(text.capacity() + 1) : 0;
}

// What an entry without extras answers.
const EntryExtras& NoExtras() {
  static const EntryExtras* const kNone = new EntryExtras();
  return *kNone;
}

// Sets one field of `box`'s extras; an empty value given to no extras
// allocates none.
template <typename Field>
void SetExtra(EntryExtrasBox& box, Field EntryExtras::*field, Field value) {
  if (!value.empty() || box.get() != nullptr) box.GetOrCreate().*field = std::move(value);
}

}  // namespace

EntryExtrasBox::EntryExtrasBox(const EntryExtrasBox& other)
    : extras_(other.extras_ ? std::make_unique<EntryExtras>(*other.extras_) : nullptr) {}

EntryExtrasBox& EntryExtrasBox::operator=(const EntryExtrasBox& other) {
  if (this != &other) *this = EntryExtrasBox(other);
  return *this;
}

EntryExtras& EntryExtrasBox::GetOrCreate() {
  if (!extras_) extras_ = std::make_unique<EntryExtras>();
  return *extras_;
}

const EntryExtras& ManifestEntry::extras() const {
  return extras_.get() != nullptr ? *extras_.get() : NoExtras();
}

const std::string& ManifestEntry::symlink_target() const { return extras().symlink_target; }

const std::string& ManifestEntry::etag() const { return extras().etag; }

const std::vector<ExtendedAttribute>& ManifestEntry::xattrs() const { return extras().xattrs; }

void ManifestEntry::set_symlink_target(std::string target) {
  SetExtra(extras_, &EntryExtras::symlink_target, std::move(target));
}

void ManifestEntry::set_etag(std::string etag) {
  SetExtra(extras_, &EntryExtras::etag, std::move(etag));
}

void ManifestEntry::set_xattrs(std::vector<ExtendedAttribute> xattrs) {
  SetExtra(extras_, &EntryExtras::xattrs, std::move(xattrs));
}

uint64_t ManifestEntry::heap_bytes() const {
  uint64_t bytes = HeapBytesOf(path);
  const EntryExtras* extras = extras_.get();
  if (extras == nullptr) return bytes;
  bytes += AllocatedBytes(sizeof(EntryExtras)) + HeapBytesOf(extras->symlink_target) +
           HeapBytesOf(extras->etag);
  if (extras->xattrs.capacity() > 0) {
    bytes += AllocatedBytes(extras->xattrs.capacity() * sizeof(ExtendedAttribute));
  }
  for (const ExtendedAttribute& xattr : extras->xattrs) {
    bytes += HeapBytesOf(xattr.name) + HeapBytesOf(xattr.value);
  }
  return bytes;
}

// What a manifest of ten million entries costs per entry (bench/RESULTS.md).
static_assert(sizeof(ManifestEntry) <= 96);

uint64_t ManifestEntry::device() const { return makedev(device_ >> 20, device_ & 0xfffff); }

namespace {

constexpr uint8_t kSectorShift = 9;        // st_blocks counts 512-byte units.
constexpr uint8_t kLargestUnitShift = 20;  // No filesystem allocates in units over 1 MiB.
constexpr uint8_t kNothingAllocated = 0xff;

uint64_t BlocksInUnitsOf(uint64_t size, uint8_t shift) {
  const uint64_t unit = uint64_t{1} << shift;
  return (size + unit - 1) / unit << (shift - kSectorShift);
}

}  // namespace

uint64_t ManifestEntry::blocks() const {
  if (allocation_shift_ == kNothingAllocated) return 0;
  return BlocksInUnitsOf(size, allocation_shift_ == 0 ? kSectorShift : allocation_shift_);
}

void ManifestEntry::set_blocks(uint64_t blocks) {
  allocation_shift_ = 0;
  if (blocks == 0) {
    if (size > 0) allocation_shift_ = kNothingAllocated;
    return;
  }
  for (uint8_t shift = kSectorShift; shift <= kLargestUnitShift; ++shift) {
    if (BlocksInUnitsOf(size, shift) == blocks) {
      allocation_shift_ = shift;
      return;
    }
  }
}

bool ManifestEntry::set_device(uint64_t device) {
  if (major(device) >= (1u << 12) || minor(device) >= (1u << 20)) return false;
  device_ = major(device) << 20 | minor(device);
  return true;
}

void ManifestEntry::ToProto(v1::ManifestEntry* out) const {
  out->set_path(path);
  out->set_type(static_cast<v1::EntryType>(type));
  out->set_size(size);
  out->set_mode(mode);
  out->set_mtime_ns(mtime_ns);
  out->set_symlink_target(symlink_target());
  out->set_etag(etag());
  out->set_uid(uid);
  out->set_gid(gid);
  out->set_device(device());
  out->set_inode(inode);
  out->set_ctime_ns(ctime_ns);
  out->set_nlink(nlink);
  if (allocation_shift_ != 0) out->set_blocks(blocks());
  for (const ExtendedAttribute& xattr : xattrs()) {
    v1::ExtendedAttribute* added = out->add_xattrs();
    added->set_name(xattr.name);
    added->set_value(xattr.value);
  }
}

absl::StatusOr<ManifestEntry> ManifestEntry::FromProto(v1::ManifestEntry entry) {
  if (entry.type() < v1::ENTRY_TYPE_FILE || entry.type() > v1::ENTRY_TYPE_SYMLINK) {
    return absl::InvalidArgumentError(
        absl::StrCat("manifest entry '", entry.path(), "' has unknown type ", entry.type()));
  }
  if (!IsCleanDatasetPath(entry.path())) {
    return absl::InvalidArgumentError(
        absl::StrCat("manifest entry path '", entry.path(), "' is not clean"));
  }
  ManifestEntry out;
  out.path = std::move(*entry.mutable_path());
  out.type = static_cast<EntryType>(entry.type());
  out.size = entry.size();
  out.mode = entry.mode();
  out.mtime_ns = entry.mtime_ns();
  out.set_symlink_target(std::move(*entry.mutable_symlink_target()));
  out.set_etag(std::move(*entry.mutable_etag()));
  out.uid = entry.uid();
  out.gid = entry.gid();
  if (!out.set_device(entry.device())) {
    return absl::InvalidArgumentError(absl::StrCat("manifest entry '", out.path, "' has device ",
                                                   entry.device(), ", no Linux device number"));
  }
  out.inode = entry.inode();
  out.ctime_ns = entry.ctime_ns();
  // Records made before link counts were kept have none.
  out.nlink = std::max(entry.nlink(), 1u);
  // Records made before allocations were kept have none.
  if (entry.has_blocks()) out.set_blocks(entry.blocks());
  if (entry.xattrs_size() > 0) {
    std::vector<ExtendedAttribute> xattrs;
    xattrs.reserve(entry.xattrs_size());
    for (v1::ExtendedAttribute& xattr : *entry.mutable_xattrs()) {
      xattrs.push_back({std::move(*xattr.mutable_name()), std::move(*xattr.mutable_value())});
    }
    if (!std::is_sorted(xattrs.begin(), xattrs.end(), ByName)) {
      std::sort(xattrs.begin(), xattrs.end(), ByName);
    }
    out.set_xattrs(std::move(xattrs));
  }
  return out;
}

void SkippedEntries::Add(std::string path, std::string reason) {
  if (listed.size() < kMaxListed) listed.push_back({std::move(path), std::move(reason)});
  ++count;
}

absl::StatusOr<Manifest> Manifest::Build(DatasetIdentity identity, ManifestEntries entries,
                                         SkippedEntries skipped) {
  if (identity.chunk_size == 0) {
    return absl::InvalidArgumentError("manifest chunk size must be positive");
  }
  if (entries.size() > kMaxManifestEntries) {
    return absl::OutOfRangeError(
        absl::StrCat("manifest of ", entries.size(), " entries; at most ", kMaxManifestEntries));
  }
  auto by_path = [](const ManifestEntry& a, const ManifestEntry& b) { return a.path < b.path; };
  // Scans and servers hand over sorted entries, and sorting a million of them
  // in place costs more than building the rest of the manifest.
  if (!std::is_sorted(entries.begin(), entries.end(), by_path)) SortByPath(entries);
  Manifest manifest;
  // Fields are gathered and hashed in blocks: one Xxh3Stream::Update per field
  // costs more than hashing its bytes, and the digest does not depend on how
  // the input is split.
  std::string block;
  Xxh3Stream hash;
  AppendBytes(identity.name, &block);
  AppendBytes(identity.source, &block);
  AppendU64(identity.chunk_size, &block);
  for (size_t i = 0; i < entries.size(); ++i) {
    const ManifestEntry& entry = entries[i];
    if (i > 0 && entries[i - 1].path == entry.path) {
      return absl::InvalidArgumentError(absl::StrCat("manifest has path '", entry.path, "' twice"));
    }
    AppendBytes(entry.path, &block);
    AppendU64(static_cast<uint64_t>(entry.type), &block);
    AppendU64(entry.size, &block);
    AppendU64(entry.mode, &block);
    AppendU64(static_cast<uint64_t>(entry.mtime_ns), &block);
    AppendBytes(entry.symlink_target(), &block);
    AppendBytes(entry.etag(), &block);
    AppendU64(entry.uid, &block);
    AppendU64(entry.gid, &block);
    AppendU64(entry.device(), &block);
    AppendU64(entry.inode, &block);
    AppendU64(static_cast<uint64_t>(entry.ctime_ns), &block);
    AppendLinksAndAttributes(entry, &block);
    manifest.memory_bytes_ += entry.heap_bytes();
    if (block.size() >= kHashBlockBytes) {
      hash.Update(block);
      block.clear();
    }
    switch (entry.type) {
      case EntryType::kFile:
        // Chunk indexes are 32-bit: a larger file's chunks could not all be
        // named, and its chunk count would wrap.
        if (entry.size > uint64_t{identity.chunk_size} << 32) {
          return absl::InvalidArgumentError(
              absl::StrCat("manifest file '", entry.path, "' of ", entry.size,
                           " bytes has more than 2^32 chunks of ", identity.chunk_size, " bytes"));
        }
        ++manifest.file_count_;
        break;
      case EntryType::kDirectory:
        ++manifest.directory_count_;
        break;
      case EntryType::kSymlink:
        break;
    }
  }
  hash.Update(block);
  manifest.version_ = hash.Digest();
  manifest.hard_link_aliases_ = FindHardLinks(entries);
  for (uint64_t i = 0; i < entries.size(); ++i) {
    if (entries[i].type != EntryType::kFile || manifest.IsHardLinkAlias(i)) continue;
    manifest.total_bytes_ += entries[i].size;
    manifest.chunk_count_ += ChunkCount(entries[i].size, identity.chunk_size);
  }
  manifest.identity_ = std::move(identity);
  manifest.entries_ = std::move(entries);
  manifest.skipped_ = std::move(skipped);
  manifest.memory_bytes_ +=
      manifest.entries_.capacity() * sizeof(ManifestEntry) +
      manifest.hard_link_aliases_.capacity() * sizeof(manifest.hard_link_aliases_[0]);
  return manifest;
}

uint64_t Manifest::CanonicalFileId(uint64_t id) const {
  auto it = std::lower_bound(hard_link_aliases_.begin(), hard_link_aliases_.end(),
                             std::pair(id, uint64_t{0}));
  return it != hard_link_aliases_.end() && it->first == id ? it->second : id;
}

std::optional<uint64_t> Manifest::Find(std::string_view path) const {
  auto it = std::lower_bound(
      entries_.begin(), entries_.end(), path,
      [](const ManifestEntry& entry, std::string_view wanted) { return entry.path < wanted; });
  if (it == entries_.end() || it->path != path) return std::nullopt;
  return static_cast<uint64_t>(it - entries_.begin());
}

std::string_view ParentPath(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
}

bool IsBelow(std::string_view path, std::string_view directory) {
  if (directory.empty()) return !path.empty();
  return path.size() > directory.size() && path.starts_with(directory) &&
         path[directory.size()] == '/';
}

bool IsCleanDatasetPath(std::string_view path) {
  if (path.empty()) return true;
  size_t start = 0;
  while (true) {
    size_t end = path.find('/', start);
    std::string_view part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == ".." || part.find('\0') != std::string_view::npos) {
      return false;
    }
    if (end == std::string_view::npos) return true;
    start = end + 1;
  }
}

absl::StatusOr<std::string> CleanDatasetPath(std::string_view path) {
  if (path.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError("path contains a NUL byte");
  }
  std::string_view relative = path;
  while (!relative.empty() && relative.front() == '/') relative.remove_prefix(1);
  if (relative.size() != path.size() && !relative.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "path '", AsAbsl(path), "' is absolute; paths are relative to the dataset root"));
  }
  std::string clean;
  for (absl::string_view part : absl::StrSplit(AsAbsl(relative), '/', absl::SkipEmpty())) {
    if (part == "." || part == "..") {
      return absl::InvalidArgumentError(absl::StrCat("path '", AsAbsl(path), "' contains '", part,
                                                     "'; paths may not leave the dataset"));
    }
    if (!clean.empty()) clean.push_back('/');
    clean.append(part.data(), part.size());
  }
  return clean;
}

}  // namespace granary
