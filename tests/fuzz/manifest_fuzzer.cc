// Fuzzes the manifest decoder: a v1::ManifestPage, as granary-fuse and the
// catalog receive it, decoded entry by entry with ManifestEntry::FromProto and
// assembled with Manifest::Build under the page's dataset identity.
//
// Properties: bad entries and bad manifests are INVALID_ARGUMENT; a decoded
// entry encodes back to what was sent; a built manifest is sorted without
// duplicates, finds every one of its paths at its file id, counts files,
// directories, bytes and chunks exactly (a hard link's once), covers every byte of every file with
// its chunks, and hashes to the same version whatever order the entries came
// in.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/dataset/chunk_math.h"
#include "common/dataset/manifest.h"
#include "proto/granary.pb.h"
#include "tests/fuzz/fuzz_check.h"

namespace granary {
namespace {

void CheckDecodedEntry(const v1::ManifestEntry& sent, const ManifestEntry& entry) {
  v1::ManifestEntry known = sent;
  known.DiscardUnknownFields();
  // What decoding normalises: a missing link count is one, and attributes
  // are held sorted by name.
  known.set_nlink(std::max(known.nlink(), 1u));
  std::stable_sort(known.mutable_xattrs()->begin(), known.mutable_xattrs()->end(),
                   [](const v1::ExtendedAttribute& a, const v1::ExtendedAttribute& b) {
                     return a.name() < b.name();
                   });
  v1::ManifestEntry back;
  entry.ToProto(&back);
  // A block count that is neither 0 nor the size in whole allocation units is
  // counted from the size, and not sent on.
  if (known.has_blocks() && !back.has_blocks()) known.clear_blocks();
  GRANARY_FUZZ_CHECK(back.SerializeAsString() == known.SerializeAsString(), sent.path());
}

void CheckManifest(const Manifest& manifest, const ManifestEntries& decoded) {
  const ManifestEntries& entries = manifest.entries();
  GRANARY_FUZZ_CHECK(entries.size() == decoded.size(), "entries lost or added");
  uint64_t files = 0, directories = 0, bytes = 0, chunks = 0;
  const uint32_t chunk_size = manifest.chunk_size();
  for (size_t i = 0; i < entries.size(); ++i) {
    const ManifestEntry& entry = entries[i];
    GRANARY_FUZZ_CHECK(i == 0 || entries[i - 1].path < entry.path, entry.path);
    GRANARY_FUZZ_CHECK(manifest.Find(entry.path) == i, entry.path);
    if (entry.type == EntryType::kDirectory) ++directories;
    if (entry.type != EntryType::kFile) continue;
    ++files;
    // A hard link names an earlier file of the same device and inode, whose
    // bytes and chunks are counted once.
    const uint64_t canonical = manifest.CanonicalFileId(i);
    if (canonical != i) {
      GRANARY_FUZZ_CHECK(canonical < i && entries[canonical].type == EntryType::kFile &&
                             entries[canonical].device() == entry.device() &&
                             entries[canonical].inode == entry.inode && entry.inode != 0,
                         entry.path);
      continue;
    }
    bytes += entry.size;
    uint64_t count = ChunkCount(entry.size, chunk_size);
    chunks += count;
    // Chunk indexes are 32-bit and the chunks must cover the whole file: the
    // last one holds its tail, and none starts past its end.
    GRANARY_FUZZ_CHECK(count <= uint64_t{UINT32_MAX} + 1, absl::StrCat(entry.path, ": ", count));
    if (count > 0) {
      uint64_t last = count - 1;
      GRANARY_FUZZ_CHECK(
          last * chunk_size + ChunkLength(entry.size, chunk_size, last) == entry.size,
          absl::StrCat(entry.path, ": size ", entry.size, ", chunk size ", chunk_size));
    } else {
      GRANARY_FUZZ_CHECK(entry.size == 0, absl::StrCat(entry.path, ": size ", entry.size));
    }
  }
  GRANARY_FUZZ_CHECK(manifest.file_count() == files, "file count");
  GRANARY_FUZZ_CHECK(manifest.directory_count() == directories, "directory count");
  GRANARY_FUZZ_CHECK(manifest.total_bytes() == bytes, "total bytes");
  GRANARY_FUZZ_CHECK(manifest.chunk_count() == chunks, "chunk count");
}

}  // namespace
}  // namespace granary

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace granary;
  v1::ManifestPage page;
  if (!page.ParseFromArray(data, static_cast<int>(size))) return -1;
  ManifestEntries entries;
  for (const v1::ManifestEntry& proto : page.entries()) {
    absl::StatusOr<ManifestEntry> entry = ManifestEntry::FromProto(proto);
    if (!entry.ok()) {
      GRANARY_FUZZ_CHECK(absl::IsInvalidArgument(entry.status()), entry.status().ToString());
      continue;
    }
    CheckDecodedEntry(proto, *entry);
    entries.push_back(*std::move(entry));
  }
  const v1::DatasetInfo& info = page.dataset();
  DatasetIdentity identity{info.name(), info.source(), info.chunk_size()};
  absl::StatusOr<Manifest> manifest = Manifest::Build(identity, entries);
  if (!manifest.ok()) {
    GRANARY_FUZZ_CHECK(absl::IsInvalidArgument(manifest.status()), manifest.status().ToString());
    return 0;
  }
  CheckManifest(*manifest, entries);
  std::reverse(entries.begin(), entries.end());
  absl::StatusOr<Manifest> reversed = Manifest::Build(identity, entries);
  GRANARY_FUZZ_CHECK(reversed.ok() && reversed->version() == manifest->version(),
                     "the version depends on the order entries arrived in");
  return 0;
}
