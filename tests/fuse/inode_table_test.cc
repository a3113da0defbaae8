// MountedDataset's directory structure and name lookups, and InodeTable's
// retiring and releasing of versions, without a mount.
#include "fuse_client/inode_table.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "fuse_client/file_handles.h"
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

// A snapshot of dataset "ds" whose one file has `size` bytes: each size
// makes another version.
DatasetSnapshot Version(uint64_t size) {
  ManifestEntry file = File("f");
  file.size = size;
  auto manifest = Manifest::Build({"ds", "/src", 1 << 20}, {Dir(""), file});
  EXPECT_TRUE(manifest.ok()) << manifest.status();
  DatasetSnapshot snapshot{{}, *std::move(manifest)};
  snapshot.info.set_name("ds");
  snapshot.info.set_version(snapshot.manifest.version());
  return snapshot;
}

uint64_t VersionOf(const std::shared_ptr<const MountedDataset>& dataset) {
  return dataset->snapshot().manifest.version();
}

// A version refreshed away stays while anything holds it (an open file, a
// request), then goes; its inodes then resolve to nothing, and slots are
// never reused, so no number ever names another version's entry.
TEST(InodeTable, ReleasesARetiredVersionOnlyOnceNothingHoldsIt) {
  InodeTable table(0, 0, std::chrono::milliseconds(0));
  std::shared_ptr<const MountedDataset> first = table.Add(Version(1));
  table.Publish({first});
  const uint64_t first_file = first->InodeOf(*first->Lookup(0, "f"));
  EXPECT_TRUE(table.ReleaseUnused().empty()) << "a published version is never released";

  std::shared_ptr<const MountedDataset> second = table.Add(Version(2));
  table.Publish({second});
  EXPECT_EQ(table.FindDataset("ds"), second);
  EXPECT_TRUE(table.ReleaseUnused().empty()) << "held by `first`";
  EXPECT_EQ(table.Resolve(first_file).dataset, first);
  EXPECT_EQ(table.FindVersion("ds", VersionOf(first)), first);
  std::vector<uint64_t> kept = table.KeptVersions();
  std::sort(kept.begin(), kept.end());
  std::vector<uint64_t> both = {VersionOf(first), VersionOf(second)};
  std::sort(both.begin(), both.end());
  EXPECT_EQ(kept, both);

  const uint64_t first_version = VersionOf(first);
  first.reset();
  std::vector<std::shared_ptr<const MountedDataset>> released = table.ReleaseUnused();
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(VersionOf(released[0]), first_version);
  released.clear();
  EXPECT_EQ(table.Resolve(first_file).dataset, nullptr);
  EXPECT_EQ(table.FindVersion("ds", first_version), nullptr);
  EXPECT_EQ(table.KeptVersions(), std::vector<uint64_t>{VersionOf(second)});
  EXPECT_EQ(table.Resolve(second->InodeOf(0)).dataset, second);

  // The first content again is a new slot with new inodes.
  std::shared_ptr<const MountedDataset> again = table.Add(Version(1));
  EXPECT_NE(again->slot(), 0u);
  EXPECT_NE(again->slot(), second->slot());
  EXPECT_EQ(table.Resolve(first_file).dataset, nullptr);
}

// A version published again before it was released is not retired any more.
TEST(InodeTable, AVersionPublishedAgainIsKept) {
  InodeTable table(0, 0, std::chrono::milliseconds(0));
  std::shared_ptr<const MountedDataset> first = table.Add(Version(1));
  table.Publish({first});
  std::shared_ptr<const MountedDataset> second = table.Add(Version(2));
  table.Publish({second});
  table.Publish({table.FindVersion("ds", VersionOf(first))});
  const uint64_t second_version = VersionOf(second);
  second.reset();
  first.reset();
  std::vector<std::shared_ptr<const MountedDataset>> released = table.ReleaseUnused();
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(VersionOf(released[0]), second_version);
  ASSERT_NE(table.FindDataset("ds"), nullptr);
  EXPECT_EQ(table.FindDataset("ds")->slot(), 0u);
}

// Within the grace period nothing is released, held or not.
TEST(InodeTable, KeepsARetiredVersionThroughTheGracePeriod) {
  InodeTable table(0, 0, std::chrono::hours(1));
  table.Publish({table.Add(Version(1))});
  table.Publish({table.Add(Version(2))});
  EXPECT_TRUE(table.ReleaseUnused().empty());
  EXPECT_EQ(table.KeptVersions().size(), 2u);
}

// What a process taking a mount over needs: the versions of the one before
// under the same numbers, new ones above every number used, and every slot
// added or released journaled for the next.
struct RecordedJournal : SlotJournal {
  void SlotAdded(uint32_t slot, std::string_view dataset, uint64_t version) override {
    added.push_back({slot, std::string(dataset), version});
  }
  void SlotReleased(uint32_t slot) override { released.push_back(slot); }
  std::vector<std::tuple<uint32_t, std::string, uint64_t>> added;
  std::vector<uint32_t> released;
};

TEST(InodeTable, ATakeOverNumbersVersionsAsBeforeAndJournalsTheRest) {
  InodeTable before(0, 0, std::chrono::milliseconds(0));
  RecordedJournal journal;
  before.set_journal(&journal);
  std::shared_ptr<const MountedDataset> old_version = before.Add(Version(1));
  std::shared_ptr<const MountedDataset> current = before.Add(Version(2));
  before.Publish({current});
  ASSERT_EQ(journal.added.size(), 2u);
  EXPECT_EQ(journal.added[1],
            std::make_tuple(current->slot(), std::string("ds"), VersionOf(current)));
  const uint64_t file = current->InodeOf(*current->Lookup(0, "f"));

  InodeTable after(0, 0, std::chrono::milliseconds(0));
  after.Adopt(current->slot(), Version(2));
  after.SkipSlotsBelow(7);
  EXPECT_TRUE(after.HasSlot(current->slot()));
  EXPECT_FALSE(after.HasSlot(old_version->slot())) << "not adopted: its inodes answer ESTALE";
  InodeTable::Node node = after.Resolve(file);
  ASSERT_NE(node.dataset, nullptr);
  EXPECT_EQ(VersionOf(node.dataset), VersionOf(current));
  EXPECT_EQ(node.dataset->EntryOf(node.node)->path, "f");
  EXPECT_EQ(after.Resolve(old_version->InodeOf(0)).dataset, nullptr);
  EXPECT_EQ(after.Add(Version(3))->slot(), 7u);

  old_version.reset();
  before.ReleaseUnused();
  EXPECT_EQ(journal.released, std::vector<uint32_t>{0});
}

TEST(FileHandles, OwnHandlesAreTheObjectsAndEarlierOnesAreAdoptedOnce) {
  FileHandles<int> earlier(1);
  FileHandles<int> handles(2);
  const uint64_t inherited = earlier.Issue(std::make_unique<int>(7));
  const uint64_t own = handles.Issue(std::make_unique<int>(42));
  EXPECT_TRUE(handles.IssuedHere(own));
  EXPECT_FALSE(handles.IssuedHere(inherited));
  int adoptions = 0;
  auto adopt = [&] {
    ++adoptions;
    return std::make_unique<int>(8);
  };
  EXPECT_EQ(*handles.Find(own, adopt), 42);
  EXPECT_EQ(*handles.Find(inherited, adopt), 8);
  EXPECT_EQ(*handles.Find(inherited, adopt), 8);
  EXPECT_EQ(adoptions, 1);
  EXPECT_EQ(handles.Find(inherited + 8, [] { return std::unique_ptr<int>(); }), nullptr)
      << "a handle whose version is gone";
  EXPECT_EQ(*handles.Release(inherited), 8);
  EXPECT_EQ(handles.Release(inherited), nullptr) << "released once";
  EXPECT_EQ(*handles.Release(own), 42);
  earlier.Release(inherited);
}

}  // namespace
}  // namespace granary::fuse
