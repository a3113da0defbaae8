// MountedDataset's directory structure and name lookups, without a mount.
#include "fuse_client/inode_table.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace granary::fuse {
namespace {

ManifestEntry Dir(std::string path) {
  return {std::move(path), EntryType::kDirectory, 0, 040755, 1, "", ""};
}
ManifestEntry File(std::string path) {
  return {std::move(path), EntryType::kFile, 1, 0100644, 1, "", ""};
}

MountedDataset Mount(ManifestEntries entries) {
  auto manifest = Manifest::Build({"ds", "/src", 1 << 20}, std::move(entries));
  EXPECT_TRUE(manifest.ok()) << manifest.status();
  return MountedDataset(0, DatasetSnapshot{{}, *std::move(manifest)});
}

std::string PathOf(const MountedDataset& dataset, std::optional<uint64_t> node) {
  return node ? dataset.EntryOf(*node)->path : "(none)";
}

// Lookups search the first 8 bytes of names before whole names: names that
// share those bytes, or are shorter, must still be told apart.
TEST(MountedDataset, LooksUpNamesSharingTheirFirstEightBytes) {
  std::vector<std::string> names = {"abcdefg",     "abcdefgh", "abcdefgh1",        "abcdefgh2",
                                    "abcdefghzzz", "b c",      "\xc3\xa9t\xc3\xa9"};
  ManifestEntries entries = {Dir(""),         Dir("a"),    Dir("a/sub"),
                             File("a/sub/x"), File("top"), File("gone/orphan")};
  for (const std::string& name : names) entries.push_back(File("a/" + name));
  MountedDataset dataset = Mount(entries);

  std::optional<uint64_t> dir = dataset.Lookup(0, "a");
  ASSERT_EQ(PathOf(dataset, dir), "a");
  for (const std::string& name : names) {
    EXPECT_EQ(PathOf(dataset, dataset.Lookup(*dir, name)), "a/" + name);
  }
  EXPECT_EQ(PathOf(dataset, dataset.Lookup(*dir, "sub")), "a/sub");
  for (const char* absent : {"", "abcdef", "abcdefgh0", "abcdefgh3", "abcdefgi", "top", "zzz"}) {
    EXPECT_EQ(dataset.Lookup(*dir, absent), std::nullopt) << absent;
  }
  EXPECT_EQ(PathOf(dataset, dataset.Lookup(0, "top")), "top");
  EXPECT_EQ(dataset.Lookup(0, "gone"), std::nullopt);  // Not listed: its file is an orphan.

  std::vector<std::string> listed;
  for (uint64_t child : dataset.Children(*dir)) listed.emplace_back(dataset.NameOf(child));
  std::vector<std::string> expected = names;
  expected.insert(expected.begin() + 6, "sub");
  EXPECT_EQ(listed, expected);
  EXPECT_EQ(dataset.Children(0).size(), 2u);  // "a" and "top".
}

// Every node shows its source's owner, group and mode: the kernel checks
// access against them (default_permissions).
TEST(MountedDataset, StatShowsTheSourcesOwnerGroupAndMode) {
  ManifestEntry root = Dir("");
  root.mode = 040750;
  root.uid = 1001;
  root.gid = 2002;
  ManifestEntry secret = File("secret");
  secret.mode = 0100600;
  secret.uid = 1003;
  secret.gid = 2004;
  MountedDataset dataset = Mount({root, secret});

  struct stat st;
  dataset.Stat(0, &st);
  EXPECT_EQ(st.st_mode, 040750u);
  EXPECT_EQ(st.st_uid, 1001u);
  EXPECT_EQ(st.st_gid, 2002u);
  std::optional<uint64_t> node = dataset.Lookup(0, "secret");
  ASSERT_TRUE(node);
  dataset.Stat(*node, &st);
  EXPECT_EQ(st.st_mode, 0100600u);
  EXPECT_EQ(st.st_uid, 1003u);
  EXPECT_EQ(st.st_gid, 2004u);
}

// A manifest without a root entry shows its root as root's, readable by all.
TEST(MountedDataset, ARootTheManifestDoesNotListIsRootsAndOpenToAll) {
  MountedDataset dataset = Mount({File("only")});
  struct stat st;
  dataset.Stat(0, &st);
  EXPECT_EQ(st.st_mode, 040555u);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_gid, 0u);
}

}  // namespace
}  // namespace granary::fuse
