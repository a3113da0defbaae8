// MountedDataset's directory structure and name lookups, and InodeTable's
// retiring and releasing of versions, without a mount.
#include "fuse_client/operations/inode_table.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuse_client/operations/file_handles.h"
#include "gtest/gtest.h"

namespace granary::fuse {
namespace {

ManifestEntry Entry(std::string path, EntryType type, uint64_t size, uint32_t mode) {
  ManifestEntry entry;
  entry.path = std::move(path);
  entry.type = type;
  entry.size = size;
  entry.mode = mode;
  entry.mtime_ns = 1;
  return entry;
}
ManifestEntry Dir(std::string path) {
  return Entry(std::move(path), EntryType::kDirectory, 0, 040755);
}
ManifestEntry File(std::string path) {
  return Entry(std::move(path), EntryType::kFile, 1, 0100644);
}

MountedDataset Mount(ManifestEntries entries) {
  auto manifest = Manifest::Build({"ds", "/src", 1 << 20}, std::move(entries));
  EXPECT_TRUE(manifest.ok()) << manifest.status();
  return MountedDataset(0, DatasetSnapshot{{}, *std::move(manifest)});
}

std::string PathOf(const MountedDataset& dataset, std::optional<uint64_t> node) {
  return node ? dataset.EntryOf(*node)->path : "(none)";
}

// Lookups search 4 bytes of names (past what a directory's children all
// begin with) before whole names: names that share those bytes, or are
// shorter, must still be told apart.
TEST(MountedDataset, LooksUpNamesSharingTheirFirstBytes) {
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
  EXPECT_TRUE(dataset.Children(*dataset.Lookup(*dir, "abcdefg")).empty());
}

// Generated names share a long prefix ("img-0000"): the keys start past it, and
// names without it, shorter than it or equal to it are still found or not.
TEST(MountedDataset, LooksUpNamesPastTheirDirectorysCommonPrefix) {
  ManifestEntries entries = {Dir(""), Dir("imgs"), Dir("one"), File("one/only-child"),
                             Dir("empty")};
  std::vector<std::string> names = {"img-0000"};
  for (int i = 0; i < 300; ++i) names.push_back(absl::StrCat("img-0000", 1000 + i * 7, ".jpg"));
  for (const std::string& name : names) entries.push_back(File("imgs/" + name));
  MountedDataset dataset = Mount(entries);

  std::optional<uint64_t> dir = dataset.Lookup(0, "imgs");
  ASSERT_TRUE(dir.has_value());
  for (const std::string& name : names) {
    EXPECT_EQ(PathOf(dataset, dataset.Lookup(*dir, name)), "imgs/" + name);
  }
  for (const char* absent : {"", "i", "img-000", "img-00001001.jpg", "img-00001000.jpe",
                             "img-00001000.jpgx", "jmg-00001000.jpg", "\xff"}) {
    EXPECT_EQ(dataset.Lookup(*dir, absent), std::nullopt) << absent;
  }
  EXPECT_EQ(dataset.Children(*dir).size(), names.size());

  std::optional<uint64_t> one = dataset.Lookup(0, "one");
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(PathOf(dataset, dataset.Lookup(*one, "only-child")), "one/only-child");
  for (const char* absent : {"only", "only-chile", "only-child2", "a"}) {
    EXPECT_EQ(dataset.Lookup(*one, absent), std::nullopt) << absent;
  }
  std::optional<uint64_t> empty = dataset.Lookup(0, "empty");
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(dataset.Children(*empty).empty());
  EXPECT_EQ(dataset.Lookup(*empty, "x"), std::nullopt);
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

// A snapshot of dataset `name` of `files` files, the first of which has
// `size` bytes: each size makes another version.
DatasetSnapshot Version(uint64_t size, std::string name = "ds", int files = 1) {
  ManifestEntries entries = {Dir("")};
  for (int i = 0; i < files; ++i) {
    ManifestEntry file = File(i == 0 ? "f" : absl::StrCat("file-", i));
    file.size = i == 0 ? size : 0;
    entries.push_back(std::move(file));
  }
  auto manifest = Manifest::Build({name, "/src", 1 << 20}, std::move(entries));
  EXPECT_TRUE(manifest.ok()) << manifest.status();
  DatasetSnapshot snapshot{{}, *std::move(manifest)};
  snapshot.info.set_name(name);
  snapshot.info.set_version(snapshot.manifest.version());
  snapshot.info.set_total_bytes(snapshot.manifest.total_bytes());
  return snapshot;
}

uint64_t VersionOf(const std::shared_ptr<const MountedDataset>& dataset) {
  return dataset->snapshot().manifest.version();
}

// The server a table loads manifests from: the versions it has, and how
// often each was loaded.
struct Server {
  uint64_t Add(DatasetSnapshot snapshot) {
    const uint64_t version = snapshot.manifest.version();
    versions.insert_or_assign(version, std::move(snapshot));
    return version;
  }
  absl::StatusOr<DatasetSnapshot> Load(std::string_view name, uint64_t version) {
    ++loads[version];
    if (!available) return absl::UnavailableError("the server is down");
    if (restarting_loads > 0) {
      --restarting_loads;
      return absl::UnavailableError("the server restarts");
    }
    auto found = versions.find(version);
    if (found == versions.end() || found->second.info.name() != name) {
      return absl::NotFoundError("no such version");
    }
    return found->second;
  }
  std::map<uint64_t, DatasetSnapshot> versions;
  std::map<uint64_t, int> loads;
  bool available = true;
  int restarting_loads = 0;  // Loads answered UNAVAILABLE before it is back.
};

// A table over `server` whose loads fail at once when the server is down,
// unless `unavailable_wait` says otherwise.
InodeTable::Options TableOptions(
    Server& server, std::chrono::milliseconds release_after = std::chrono::milliseconds(0),
    uint64_t memory_budget = uint64_t{1} << 30,
    std::chrono::milliseconds unavailable_wait = std::chrono::milliseconds(0)) {
  return {.uid = 0,
          .gid = 0,
          .release_after = release_after,
          .memory_budget = memory_budget,
          .load = [&server](std::string_view name,
                            uint64_t version) { return server.Load(name, version); },
          .unavailable_wait = unavailable_wait};
}

// Shows `snapshot` in the table, loaded, as a refresh of a dataset being
// read does.
std::shared_ptr<const MountedDataset> ShowLoaded(InodeTable& table, DatasetSnapshot snapshot) {
  const v1::DatasetInfo info = snapshot.info;
  const uint32_t slot = table.Show(info, std::move(snapshot));
  return table.Resolve(InodeNumber(slot, 0)).dataset;
}

// A version refreshed away stays while anything holds it (an open file, a
// request), then goes; its inodes then resolve to nothing, and slots are
// never reused, so no number ever names another version's entry.
TEST(InodeTable, ReleasesARetiredVersionOnlyOnceNothingHoldsIt) {
  Server server;
  InodeTable table(TableOptions(server));
  std::shared_ptr<const MountedDataset> first = ShowLoaded(table, Version(1));
  ASSERT_NE(first, nullptr);
  table.Publish({first->slot()});
  const uint64_t first_file = first->InodeOf(*first->Lookup(0, "f"));
  EXPECT_TRUE(table.ReleaseUnused().empty()) << "a published version is never released";

  std::shared_ptr<const MountedDataset> second = ShowLoaded(table, Version(2));
  table.Publish({second->slot()});
  EXPECT_EQ(*table.FindDataset("ds"), second);
  EXPECT_TRUE(table.ReleaseUnused().empty()) << "held by `first`";
  EXPECT_EQ(table.Resolve(first_file).dataset, first);
  EXPECT_TRUE(table.HasVersion("ds", VersionOf(first)));
  std::vector<uint64_t> kept = table.KeptVersions();
  std::sort(kept.begin(), kept.end());
  std::vector<uint64_t> both = {VersionOf(first), VersionOf(second)};
  std::sort(both.begin(), both.end());
  EXPECT_EQ(kept, both);

  const uint64_t first_version = VersionOf(first);
  first.reset();
  std::vector<InodeTable::Released> released = table.ReleaseUnused();
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].name, "ds");
  EXPECT_EQ(released[0].version, first_version);
  EXPECT_EQ(table.Resolve(first_file).dataset, nullptr);
  EXPECT_FALSE(table.HasVersion("ds", first_version));
  EXPECT_EQ(table.KeptVersions(), std::vector<uint64_t>{VersionOf(second)});
  EXPECT_EQ(table.Resolve(second->InodeOf(0)).dataset, second);
  EXPECT_EQ(table.memory_use().versions, 1u);
  EXPECT_EQ(table.memory_use().bytes, second->memory_bytes());

  // The first content again is a new slot with new inodes.
  std::shared_ptr<const MountedDataset> again = ShowLoaded(table, Version(1));
  EXPECT_NE(again->slot(), 0u);
  EXPECT_NE(again->slot(), second->slot());
  EXPECT_EQ(table.Resolve(first_file).dataset, nullptr);
}

// A version published again before it was released is not retired any more.
TEST(InodeTable, AVersionPublishedAgainIsKept) {
  Server server;
  InodeTable table(TableOptions(server));
  std::shared_ptr<const MountedDataset> first = ShowLoaded(table, Version(1));
  table.Publish({first->slot()});
  std::shared_ptr<const MountedDataset> second = ShowLoaded(table, Version(2));
  table.Publish({second->slot()});
  table.Publish({table.Show(first->snapshot().info)});
  const uint64_t second_version = VersionOf(second);
  second.reset();
  first.reset();
  std::vector<InodeTable::Released> released = table.ReleaseUnused();
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].version, second_version);
  EXPECT_EQ(table.ShownSlot("ds"), 0u);
}

// Within the grace period nothing is released, held or not.
TEST(InodeTable, KeepsARetiredVersionThroughTheGracePeriod) {
  Server server;
  InodeTable table(TableOptions(server, std::chrono::hours(1)));
  table.Publish({table.Show(Version(1).info)});
  table.Publish({table.Show(Version(2).info)});
  EXPECT_TRUE(table.ReleaseUnused().empty());
  EXPECT_EQ(table.KeptVersions().size(), 2u);
}

// A mount of many datasets holds only those read: publishing loads nothing,
// listing the root loads nothing, and the first resolve of an inode loads
// its version once.
TEST(InodeTable, AVersionLoadsWhenFirstResolvedNotWhenPublished) {
  Server server;
  const uint64_t version = server.Add(Version(7, "images", 3));
  InodeTable table(TableOptions(server));
  const uint32_t slot = table.Show(server.versions.at(version).info);
  table.Publish({slot});
  std::vector<InodeTable::Listed> listed = table.ListDatasets();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].name, "images");
  EXPECT_EQ(listed[0].inode, InodeNumber(slot, 0));
  EXPECT_EQ(listed[0].total_bytes, 7u);
  EXPECT_EQ(listed[0].loaded, nullptr);
  EXPECT_EQ(server.loads[version], 0);
  EXPECT_EQ(table.memory_use().versions, 0u);

  // Node 2 is the first file, "f", the manifest's entry 1.
  InodeTable::Node node = table.Resolve(InodeNumber(slot, 2));
  ASSERT_NE(node.dataset, nullptr);
  EXPECT_EQ(node.dataset->EntryOf(node.node)->path, "f");
  EXPECT_EQ(table.Resolve(InodeNumber(slot, 3)).dataset, node.dataset);
  EXPECT_EQ(*table.FindDataset("images"), node.dataset);
  EXPECT_EQ(server.loads[version], 1);
  EXPECT_EQ(table.ListDatasets()[0].loaded, node.dataset);
  EXPECT_EQ(table.Resolve(InodeNumber(slot, 99)).dataset, nullptr) << "past the last node";
  EXPECT_TRUE(absl::IsNotFound(table.FindDataset("other").status()));
}

// Beyond the budget, versions nothing holds are dropped, least recently used
// first, and load again, under the same inode numbers, when next used; a
// held version is never dropped.
TEST(InodeTable, VersionsBeyondTheBudgetAreDroppedLeastRecentlyUsedFirst) {
  Server server;
  std::vector<uint64_t> versions;
  std::vector<uint32_t> slots;
  for (std::string name : {"a", "b", "c"}) versions.push_back(server.Add(Version(1, name, 500)));
  const uint64_t one = MountedDataset(0, server.versions.at(versions[0])).memory_bytes();
  InodeTable table(TableOptions(server, std::chrono::milliseconds(0), one * 5 / 2));
  for (uint64_t version : versions) slots.push_back(table.Show(server.versions.at(version).info));
  table.Publish(slots);
  // The order of use is kept by a clock of a few milliseconds.
  auto use = [&](int i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    InodeTable::Node node = table.Resolve(InodeNumber(slots[i], 2));
    EXPECT_NE(node.dataset, nullptr);
    if (node.dataset != nullptr) {
      EXPECT_EQ(node.dataset->EntryOf(node.node)->path, "f");
    }
    return node.dataset;
  };
  use(0);
  use(1);
  use(2);
  EXPECT_EQ(table.memory_use().versions, 2u);
  EXPECT_LE(table.memory_use().bytes, one * 5 / 2);
  EXPECT_EQ(table.ListDatasets()[0].loaded, nullptr) << "a, used least recently, was dropped";
  use(1);
  use(0);
  EXPECT_EQ(server.loads[versions[0]], 2) << "loaded again";
  EXPECT_EQ(server.loads[versions[1]], 1);
  EXPECT_EQ(table.ListDatasets()[2].loaded, nullptr) << "c, used least recently, was dropped";

  std::vector<std::shared_ptr<const MountedDataset>> held = {use(0), use(1), use(2)};
  EXPECT_EQ(table.memory_use().versions, 3u) << "held versions stay over the budget";
  held.clear();
  table.ReleaseUnused();
  EXPECT_EQ(table.memory_use().versions, 2u);
  EXPECT_LE(table.memory_use().bytes, one * 5 / 2);
  EXPECT_EQ(server.loads[versions[2]], 2);
}

// A version that cannot be loaded answers nothing (the mount replies EIO or
// ESTALE) and is tried again when next used.
TEST(InodeTable, AVersionThatCannotLoadIsTriedAgainWhenNextUsed) {
  Server server;
  const uint64_t version = server.Add(Version(1));
  InodeTable table(TableOptions(server));
  table.Publish({table.Show(server.versions.at(version).info)});
  server.available = false;
  absl::StatusOr<std::shared_ptr<const MountedDataset>> failed = table.FindDataset("ds");
  EXPECT_TRUE(absl::IsUnavailable(failed.status())) << failed.status();
  EXPECT_EQ(table.Resolve(InodeNumber(0, 1)).dataset, nullptr);
  server.available = true;
  EXPECT_NE(table.Resolve(InodeNumber(0, 1)).dataset, nullptr);
  EXPECT_EQ(server.loads[version], 3);
}

// A first load while the server restarts waits for it within the wait, and
// fails as the server answered once the wait is over.
TEST(InodeTable, ALoadWaitsForARestartingServerWithinTheWait) {
  Server server;
  const uint64_t version = server.Add(Version(1));
  InodeTable waiting(TableOptions(server, std::chrono::milliseconds(0), uint64_t{1} << 30,
                                  std::chrono::seconds(10)));
  waiting.Publish({waiting.Show(server.versions.at(version).info)});
  server.restarting_loads = 3;
  absl::StatusOr<std::shared_ptr<const MountedDataset>> loaded = waiting.FindDataset("ds");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(server.loads[version], 4);

  Server down;
  const uint64_t down_version = down.Add(Version(1));
  InodeTable briefly(TableOptions(down, std::chrono::milliseconds(0), uint64_t{1} << 30,
                                  std::chrono::milliseconds(250)));
  briefly.Publish({briefly.Show(down.versions.at(down_version).info)});
  down.available = false;
  absl::StatusOr<std::shared_ptr<const MountedDataset>> failed = briefly.FindDataset("ds");
  EXPECT_TRUE(absl::IsUnavailable(failed.status())) << failed.status();
  EXPECT_GE(down.loads[down_version], 2);
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
  Server server;
  InodeTable before(TableOptions(server));
  RecordedJournal journal;
  before.set_journal(&journal);
  const uint32_t old_slot = before.Show(Version(1).info);
  std::shared_ptr<const MountedDataset> current = ShowLoaded(before, Version(2));
  server.Add(Version(2));
  before.Publish({current->slot()});
  ASSERT_EQ(journal.added.size(), 2u);
  EXPECT_EQ(journal.added[1],
            std::make_tuple(current->slot(), std::string("ds"), VersionOf(current)));
  const uint64_t file = current->InodeOf(*current->Lookup(0, "f"));

  InodeTable after(TableOptions(server));
  after.Adopt(current->slot(), "ds", VersionOf(current));
  after.SkipSlotsBelow(7);
  EXPECT_TRUE(after.HasSlot(current->slot()));
  EXPECT_FALSE(after.HasSlot(old_slot)) << "not adopted: its inodes answer ESTALE";
  InodeTable::Node node = after.Resolve(file);
  ASSERT_NE(node.dataset, nullptr);
  EXPECT_EQ(VersionOf(node.dataset), VersionOf(current));
  EXPECT_EQ(node.dataset->EntryOf(node.node)->path, "f");
  EXPECT_EQ(after.Resolve(InodeNumber(old_slot, 0)).dataset, nullptr);
  EXPECT_EQ(after.Show(Version(3).info), 7u);

  before.ReleaseUnused();
  EXPECT_EQ(journal.released, std::vector<uint32_t>{old_slot});
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
