#include <gtest/gtest.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/huge_page_allocator.h"
#include "common/base/size.h"
#include "common/base/status.h"
#include "common/dataset/chunk_key.h"
#include "common/dataset/chunk_math.h"
#include "common/dataset/hash.h"
#include "common/dataset/manifest.h"
#include "common/net/server_address.h"
#include "proto/granary.pb.h"

namespace granary {
namespace {

TEST(ParseSize, AcceptsBinaryDecimalAndPlainBytes) {
  EXPECT_EQ(*ParseSize("4096"), 4096u);
  EXPECT_EQ(*ParseSize("4MiB"), 4u << 20);
  EXPECT_EQ(*ParseSize("4mib"), 4u << 20);
  EXPECT_EQ(*ParseSize("200G"), 200'000'000'000u);
  EXPECT_EQ(*ParseSize("1.5GiB"), 3ull << 29);
  EXPECT_EQ(*ParseSize(" 64 KiB "), 64u << 10);
  EXPECT_EQ(*ParseSize("10B"), 10u);
}

TEST(ParseSize, RejectsGarbageNamingTheText) {
  for (const char* bad : {"", "MiB", "4XB", "-1", "1.2.3G", "abc"}) {
    auto size = ParseSize(bad);
    ASSERT_FALSE(size.ok()) << bad;
    EXPECT_EQ(size.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(size.status().message().find(bad), std::string::npos);
  }
  EXPECT_EQ(ParseSize("999999999TiB").status().code(), absl::StatusCode::kOutOfRange);
}

TEST(FormatSize, PicksAUnit) {
  EXPECT_EQ(FormatSize(512), "512 B");
  EXPECT_EQ(FormatSize(4u << 20), "4.0 MiB");
  EXPECT_EQ(FormatSize(1536), "1.5 KiB");
}

TEST(ChunkKey, EncodingRoundTripsAndSortsByVersionFileChunk) {
  ChunkKey a{0x0102030405060708ull, 42, 7};
  auto decoded = ChunkKey::Decode(a.Encode());
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, a);
  ChunkKey b{a.dataset_version, 42, 8};
  ChunkKey c{a.dataset_version, 43, 0};
  ChunkKey d{a.dataset_version + 1, 0, 0};
  EXPECT_LT(a.Encode(), b.Encode());
  EXPECT_LT(b.Encode(), c.Encode());
  EXPECT_LT(c.Encode(), d.Encode());
  EXPECT_TRUE(a.Encode().starts_with(ChunkKey::VersionPrefix(a.dataset_version)));
  EXPECT_EQ(ChunkKey::Decode("short").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.ToString(), "v0102030405060708/f42/c7");
}

TEST(Version, FormatsAndParsesHex) {
  EXPECT_EQ(FormatVersion(0xabc), "0000000000000abc");
  EXPECT_EQ(*ParseVersion("0000000000000abc"), 0xabcu);
  EXPECT_FALSE(ParseVersion("xyz").ok());
  EXPECT_FALSE(ParseVersion("").ok());
}

TEST(Xxh3, StreamMatchesOneShot) {
  std::string data(100'000, 'x');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31);
  Xxh3Stream stream;
  stream.Update(std::string_view(data).substr(0, 777));
  stream.Update(std::string_view(data).substr(777));
  EXPECT_EQ(stream.Digest(), Xxh3(data));
  EXPECT_NE(Xxh3("a"), Xxh3("b"));
}

TEST(SliceRange, SplitsAtChunkBoundariesAndClipsAtEnd) {
  constexpr uint32_t kChunk = 1024;
  auto slices = SliceRange(3000, kChunk, 1000, 1500);
  ASSERT_EQ(slices.size(), 3u);
  EXPECT_EQ(slices[0].chunk_index, 0u);
  EXPECT_EQ(slices[0].offset_in_chunk, 1000u);
  EXPECT_EQ(slices[0].length, 24u);
  EXPECT_EQ(slices[0].offset_in_range, 0u);
  EXPECT_EQ(slices[1].chunk_index, 1u);
  EXPECT_EQ(slices[1].offset_in_chunk, 0u);
  EXPECT_EQ(slices[1].length, 1024u);
  EXPECT_EQ(slices[1].offset_in_range, 24u);
  EXPECT_EQ(slices[2].chunk_index, 2u);
  EXPECT_EQ(slices[2].length, 452u);
  EXPECT_EQ(slices[2].offset_in_range, 1048u);
  EXPECT_TRUE(SliceRange(3000, kChunk, 3000, 10).empty());
  auto tail = SliceRange(3000, kChunk, 2900, 1000);
  ASSERT_EQ(tail.size(), 1u);
  EXPECT_EQ(tail[0].length, 100u);
  EXPECT_EQ(ChunkCount(3000, kChunk), 3u);
  EXPECT_EQ(ChunkCount(0, kChunk), 0u);
  EXPECT_EQ(ChunkLength(3000, kChunk, 2), 952u);
  EXPECT_EQ(ChunkLength(3000, kChunk, 3), 0u);
}

TEST(DatasetPath, ParentsAndWhatLiesBelowADirectory) {
  EXPECT_EQ(ParentPath("a/b/c"), "a/b");
  EXPECT_EQ(ParentPath("a"), "");
  EXPECT_TRUE(IsBelow("a/b", "a"));
  EXPECT_TRUE(IsBelow("a/b/c", "a"));
  EXPECT_FALSE(IsBelow("a-b", "a")) << "a sibling sharing the name";
  EXPECT_FALSE(IsBelow("ab/c", "a"));
  EXPECT_FALSE(IsBelow("a", "a"));
  EXPECT_TRUE(IsBelow("a", "")) << "everything lies below the root";
  EXPECT_FALSE(IsBelow("", ""));
}

TEST(CleanDatasetPath, NormalisesAndRejectsEscapes) {
  EXPECT_EQ(*CleanDatasetPath("a/b//c/"), "a/b/c");
  EXPECT_EQ(*CleanDatasetPath(""), "");
  EXPECT_EQ(*CleanDatasetPath("/"), "");
  for (const char* bad : {"../etc/passwd", "a/../../b", "/etc/passwd", "a/./b"}) {
    auto clean = CleanDatasetPath(bad);
    ASSERT_FALSE(clean.ok()) << bad;
    EXPECT_EQ(clean.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(clean.status().message().find(bad), std::string::npos);
  }
}

ManifestEntry Entry(std::string path, EntryType type, uint64_t size, uint32_t mode,
                    int64_t mtime_ns) {
  ManifestEntry entry;
  entry.path = std::move(path);
  entry.type = type;
  entry.size = size;
  entry.mode = mode;
  entry.mtime_ns = mtime_ns;
  return entry;
}

ManifestEntries SampleEntries() {
  ManifestEntries entries;
  entries.push_back(Entry("b.txt", EntryType::kFile, 5000, 0100644, 1));
  entries.push_back(Entry("", EntryType::kDirectory, 0, 040755, 1));
  entries.push_back(Entry("a", EntryType::kDirectory, 0, 040755, 1));
  entries.push_back(Entry("a/x.bin", EntryType::kFile, 1024, 0100600, 2));
  return entries;
}

TEST(Manifest, SortsCountsAndFinds) {
  auto manifest = Manifest::Build({"ds", "/src", 1024}, SampleEntries());
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->entries()[0].path, "");
  EXPECT_EQ(manifest->entries()[2].path, "a/x.bin");
  EXPECT_EQ(manifest->file_count(), 2u);
  EXPECT_EQ(manifest->directory_count(), 2u);
  EXPECT_EQ(manifest->total_bytes(), 6024u);
  EXPECT_EQ(manifest->chunk_count(), 5u + 1u);
  EXPECT_EQ(manifest->Find("a/x.bin"), 2u);
  EXPECT_EQ(manifest->Find("missing"), std::nullopt);
}

// The sort moves each entry into place along the cycles of its permutation:
// every field must travel with its path, whatever the cycles' lengths.
TEST(Manifest, SortingMovesWholeEntries) {
  constexpr int kEntries = 5000;
  ManifestEntries entries;
  entries.push_back(Entry("", EntryType::kDirectory, 0, 040755, 1));
  for (int i = 0; i < kEntries; ++i) {
    ManifestEntry& entry = entries.emplace_back(
        Entry(absl::StrFormat("file-%05d-with-a-name-no-string-holds-in-place", i),
              EntryType::kFile, static_cast<uint64_t>(i), 0100644, i));
    entry.inode = static_cast<uint64_t>(i) + 1;
    if (i % 7 == 0) entry.set_etag(absl::StrCat("etag-", i));
  }
  std::mt19937 random(23);
  std::shuffle(entries.begin(), entries.end(), random);
  auto manifest = Manifest::Build({"ds", "/src", 1024}, std::move(entries));
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  ASSERT_EQ(manifest->entries().size(), kEntries + 1u);
  EXPECT_EQ(manifest->entries()[0].path, "");
  for (int i = 0; i < kEntries; ++i) {
    const ManifestEntry& entry = manifest->entries()[i + 1];
    ASSERT_EQ(entry.path, absl::StrFormat("file-%05d-with-a-name-no-string-holds-in-place", i));
    EXPECT_EQ(entry.size, static_cast<uint64_t>(i));
    EXPECT_EQ(entry.mtime_ns, i);
    EXPECT_EQ(entry.inode, static_cast<uint64_t>(i) + 1);
    EXPECT_EQ(entry.etag(), i % 7 == 0 ? absl::StrCat("etag-", i) : "");
  }
}

TEST(Manifest, VersionFollowsContentAndIdentity) {
  auto first = Manifest::Build({"ds", "/src", 1024}, SampleEntries());
  auto same = Manifest::Build({"ds", "/src", 1024}, SampleEntries());
  auto entries = SampleEntries();
  entries[0].mtime_ns = 2;
  auto touched = Manifest::Build({"ds", "/src", 1024}, entries);
  auto other_chunks = Manifest::Build({"ds", "/src", 2048}, SampleEntries());
  auto other_name = Manifest::Build({"ds2", "/src", 1024}, SampleEntries());
  EXPECT_EQ(first->version(), same->version());
  EXPECT_NE(first->version(), touched->version());
  EXPECT_NE(first->version(), other_chunks->version());
  EXPECT_NE(first->version(), other_name->version());
}

// Versions are stored in catalogs and named by chunk keys: the hash of a given
// manifest must never change.
TEST(Manifest, VersionIsStable) {
  auto entries = SampleEntries();
  ManifestEntry& link = entries.emplace_back(Entry("a/l", EntryType::kSymlink, 0, 0120777, 3));
  link.set_symlink_target("x.bin");
  link.set_etag("etag");
  auto manifest = Manifest::Build({"ds", "/src", 1024}, entries);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->version(), 0x2fc523e57e46296du);
  // A device is hashed as stat() gave it, however the entry holds it.
  ASSERT_TRUE(entries[0].set_device(makedev(259, 70000)));
  entries[0].inode = 12;
  auto on_a_device = Manifest::Build({"ds", "/src", 1024}, entries);
  ASSERT_TRUE(on_a_device.ok()) << on_a_device.status();
  EXPECT_EQ(on_a_device->version(), 0x53ce2b380ee77002u);
}

// Files of one device and inode are one file: the first path holds the
// bytes, the others name it and are not counted twice.
TEST(Manifest, HardLinksShareTheFirstPathsChunks) {
  ManifestEntries entries = SampleEntries();
  entries.push_back(Entry("z/third", EntryType::kFile, 5000, 0100644, 1));
  entries.push_back(Entry("z", EntryType::kDirectory, 0, 040755, 1));
  for (ManifestEntry& entry : entries) {
    if (entry.path == "b.txt" || entry.path == "z/third") {
      ASSERT_TRUE(entry.set_device(7));
      entry.inode = 42;
      entry.nlink = 2;
    }
  }
  auto manifest = Manifest::Build({"ds", "/src", 1024}, entries);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  const uint64_t first = *manifest->Find("b.txt");
  const uint64_t second = *manifest->Find("z/third");
  EXPECT_EQ(manifest->CanonicalFileId(second), first);
  EXPECT_EQ(manifest->CanonicalFileId(first), first);
  EXPECT_TRUE(manifest->IsHardLinkAlias(second));
  EXPECT_FALSE(manifest->IsHardLinkAlias(*manifest->Find("a/x.bin")));
  EXPECT_EQ(manifest->file_count(), 3u);
  EXPECT_EQ(manifest->total_bytes(), 6024u);
  EXPECT_EQ(manifest->chunk_count(), 5u + 1u);

  // An unknown inode (0) is never a link, and a link count is part of the
  // version.
  for (ManifestEntry& entry : entries) entry.inode = 0;
  auto unlinked = Manifest::Build({"ds", "/src", 1024}, entries);
  EXPECT_FALSE(unlinked->IsHardLinkAlias(*unlinked->Find("z/third")));
  entries.back().nlink = 3;
  EXPECT_NE(Manifest::Build({"ds", "/src", 1024}, entries)->version(), unlinked->version());
}

TEST(Manifest, AttributesAndLinkCountsSurviveTheWire) {
  ManifestEntry entry = Entry("a/\xe9", EntryType::kFile, 3, 0100644, -1'750'000'000);
  entry.nlink = 4;
  entry.set_xattrs({{"user.a", std::string("\0\xff", 2)}, {"user.b", ""}});
  v1::ManifestEntry wire;
  entry.ToProto(&wire);
  auto back = ManifestEntry::FromProto(wire);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->path, entry.path);
  EXPECT_EQ(back->nlink, 4u);
  EXPECT_EQ(back->mtime_ns, -1'750'000'000);
  EXPECT_EQ(back->xattrs(), entry.xattrs());
  // A record from before link counts were kept reads as one link.
  wire.clear_nlink();
  EXPECT_EQ(ManifestEntry::FromProto(wire)->nlink, 1u);
}

TEST(Manifest, DevicesSurviveTheWireAndOnlyLinuxOnesAreTaken) {
  ManifestEntry entry = Entry("f", EntryType::kFile, 3, 0100644, 1);
  const uint64_t nvme_partition = makedev(259, 70000);
  ASSERT_TRUE(entry.set_device(nvme_partition));
  v1::ManifestEntry wire;
  entry.ToProto(&wire);
  EXPECT_EQ(wire.device(), nvme_partition);
  EXPECT_EQ(ManifestEntry::FromProto(wire)->device(), nvme_partition);

  EXPECT_FALSE(entry.set_device(makedev(4096, 0)));
  EXPECT_FALSE(entry.set_device(makedev(0, 1u << 20)));
  EXPECT_EQ(entry.device(), nvme_partition);
  wire.set_device(makedev(4096, 1));
  absl::StatusOr<ManifestEntry> foreign = ManifestEntry::FromProto(wire);
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(foreign.status().message().find("'f' has device"), std::string::npos)
      << foreign.status();
}

// du counts what the source allocated: a 100-byte file in a 4 KiB block, a
// short symlink in none; counts no unit explains fall back to the size.
TEST(Manifest, BlocksAreTheSourcesAllocationAndSurviveTheWire) {
  ManifestEntry tiny = Entry("tiny", EntryType::kFile, 100, 0100644, 1);
  EXPECT_EQ(tiny.blocks(), 1u);
  tiny.set_blocks(8);
  EXPECT_EQ(tiny.blocks(), 8u);
  ManifestEntry link = Entry("link", EntryType::kSymlink, 12, 0120777, 1);
  link.set_blocks(0);
  EXPECT_EQ(link.blocks(), 0u);
  ManifestEntry large = Entry("large", EntryType::kFile, (5 << 20) + 1, 0100644, 1);
  large.set_blocks((6 << 20) / 512);
  EXPECT_EQ(large.blocks(), (6u << 20) / 512);
  ManifestEntry partly_sparse = Entry("sparse", EntryType::kFile, 1 << 20, 0100644, 1);
  partly_sparse.set_blocks(24);
  EXPECT_EQ(partly_sparse.blocks(), 2048u);

  for (const ManifestEntry* entry : {&tiny, &link, &large, &partly_sparse}) {
    v1::ManifestEntry wire;
    entry->ToProto(&wire);
    EXPECT_EQ(ManifestEntry::FromProto(wire)->blocks(), entry->blocks()) << entry->path;
  }
  v1::ManifestEntry recorded_before_blocks;
  tiny.ToProto(&recorded_before_blocks);
  recorded_before_blocks.clear_blocks();
  EXPECT_EQ(ManifestEntry::FromProto(recorded_before_blocks)->blocks(), 1u);
}

TEST(Manifest, EntriesWithoutExtrasCarryNone) {
  ManifestEntry plain = Entry("short", EntryType::kFile, 1, 0100644, 1);
  plain.set_symlink_target("");
  plain.set_etag("");
  plain.set_xattrs({});
  EXPECT_EQ(plain.heap_bytes(), 0u);
  // A path that no string holds in place counts what malloc takes for it.
  ManifestEntry image =
      Entry("train/n01440764/n01440764_10026.JPEG", EntryType::kFile, 1, 0100644, 1);
  EXPECT_EQ(image.heap_bytes(), 48u);
  // Ten million entries of a manifest in a gigabyte, paths included.
  EXPECT_LE(sizeof(ManifestEntry), 96u);

  ManifestEntry link = Entry("link", EntryType::kSymlink, 0, 0120777, 1);
  link.set_symlink_target("a/target/longer/than/a/string/holds/in/place");
  ManifestEntry copy = link;
  link.set_symlink_target("elsewhere");
  EXPECT_EQ(copy.symlink_target(), "a/target/longer/than/a/string/holds/in/place");
  EXPECT_EQ(link.symlink_target(), "elsewhere");
  EXPECT_GT(copy.heap_bytes(), sizeof(EntryExtras));
  copy = plain;
  EXPECT_EQ(copy.symlink_target(), "");
  EXPECT_EQ(copy.heap_bytes(), 0u);
}

TEST(Manifest, CleanPathsAreRecognised) {
  for (const char* clean : {"", "a", "a/b.txt", "a b/c\xc3\xa9", "..a/b.."}) {
    EXPECT_TRUE(IsCleanDatasetPath(clean)) << clean;
  }
  for (const char* unclean : {"/", "/a", "a/", "a//b", ".", "..", "a/./b", "a/../b", "../a"}) {
    EXPECT_FALSE(IsCleanDatasetPath(unclean)) << unclean;
  }
  EXPECT_FALSE(IsCleanDatasetPath(std::string_view("a\0b", 3)));
}

TEST(Manifest, RejectsDuplicatesAndBadProtoEntries) {
  auto entries = SampleEntries();
  entries.push_back(entries[0]);
  EXPECT_EQ(Manifest::Build({"ds", "/src", 1024}, entries).status().code(),
            absl::StatusCode::kInvalidArgument);
  v1::ManifestEntry proto;
  proto.set_path("../x");
  proto.set_type(v1::ENTRY_TYPE_FILE);
  EXPECT_FALSE(ManifestEntry::FromProto(proto).ok());
  proto.set_path("x");
  proto.set_type(static_cast<v1::EntryType>(9));
  EXPECT_FALSE(ManifestEntry::FromProto(proto).ok());
  ManifestEntry entry = SampleEntries()[0];
  entry.ToProto(&proto);
  auto back = ManifestEntry::FromProto(proto);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->path, entry.path);
  EXPECT_EQ(back->size, entry.size);
  EXPECT_EQ(back->mode, entry.mode);
}

// Caught by the chunk-coverage property of tests/fuzz/manifest_fuzzer: a file
// of 2^64-1 bytes wrapped its chunk count to 0, and one of over 2^32 chunks had
// chunks no 32-bit chunk index can name.
TEST(Manifest, RejectsFilesOfMoreThanTwoToTheThirtyTwoChunks) {
  auto entries = SampleEntries();
  entries[0].size = (uint64_t{1024} << 32) + 1;
  auto too_big = Manifest::Build({"ds", "/src", 1024}, entries);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_big.status().message().find("b.txt"), std::string::npos) << too_big.status();
  entries[0].size = UINT64_MAX;
  EXPECT_EQ(Manifest::Build({"ds", "/src", 1024}, entries).status().code(),
            absl::StatusCode::kInvalidArgument);
  entries[0].size = uint64_t{1024} << 32;
  auto largest = Manifest::Build({"ds", "/src", 1024}, entries);
  ASSERT_TRUE(largest.ok()) << largest.status();
  EXPECT_EQ(largest->chunk_count(), (uint64_t{1} << 32) + 1);
}

TEST(Status, ErrnoMapsToMeaningfulCodes) {
  EXPECT_EQ(ErrnoStatus(ENOENT, "open /x").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ErrnoStatus(EACCES, "open /x").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoStatus(ENOSPC, "write").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(ErrnoStatus(ENOENT, "open /x").message().find("open /x"), std::string::npos);
  auto round = FromGrpcStatus(ToGrpcStatus(absl::NotFoundError("dataset 'x'")));
  EXPECT_EQ(round.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(round.message(), "dataset 'x'");
}

TEST(ServerAddress, AcceptsUnixAndHostPortOnly) {
  EXPECT_TRUE(MakeChannel("unix:/tmp/x.sock").ok());
  EXPECT_TRUE(MakeChannel("127.0.0.1:7070").ok());
  EXPECT_TRUE(MakeChannel("node7:1").ok());
  for (const char* bad : {"unix:", "localhost", "host:0", "host:99999", ":80"}) {
    auto channel = MakeChannel(bad);
    ASSERT_FALSE(channel.ok()) << bad;
    EXPECT_NE(channel.status().message().find(bad), std::string::npos);
  }
  EXPECT_EQ(ResolveServerAddress("10.0.0.1:1"), "10.0.0.1:1");
}

// Whether any mapping of this process covers `address`.
bool Mapped(uintptr_t address) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream range(line);
    uintptr_t begin = 0, end = 0;
    char dash;
    range >> std::hex >> begin >> dash >> end;
    if (begin <= address && address < end) return true;
  }
  return false;
}

// A large table is a 2 MiB-aligned mapping of its own, given back to the
// system when it is freed rather than kept by the heap.
TEST(HugePageAllocator, LargeTablesAreAlignedMappingsUnmappedWhenFreed) {
  uintptr_t address = 0;
  {
    std::vector<uint64_t, HugePageAllocator<uint64_t>> table((size_t{3} << 20) / sizeof(uint64_t),
                                                             7);
    address = reinterpret_cast<uintptr_t>(table.data());
    EXPECT_EQ(address % HugePageAllocator<uint64_t>::kHugePage, 0u);
    table.back() = 9;
    EXPECT_EQ(table.front() + table.back(), 16u);
    EXPECT_TRUE(Mapped(address));
  }
  EXPECT_FALSE(Mapped(address));
  std::vector<uint64_t, HugePageAllocator<uint64_t>> small(100, 1);
  EXPECT_EQ(small[99], 1u);
}

}  // namespace
}  // namespace granary
