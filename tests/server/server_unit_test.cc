// Unit tests of granaryd's parts that need no running server: configuration,
// the posix scanner, prewarm path selection and chunk order, the choice
// between peer copies and source reads, the write-behind queue over a
// real chunk store, and the catalog's release of older versions.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>

#include "absl/strings/str_format.h"
#include "cache_server/catalog/catalog.h"
#include "cache_server/config/config.h"
#include "cache_server/prewarm/chunk_walk.h"
#include "cache_server/prewarm/prewarm_job.h"
#include "cache_server/read_path/fetch_speeds.h"
#include "cache_server/read_path/write_behind.h"
#include "cache_server/store/chunk_store.h"
#include "common/dataset/chunk_math.h"
#include "common/source_access/source_path.h"
#include "proto/granary.pb.h"
#include "rocksdb/db.h"
#include "source/posix_scanner.h"
#include "source/source_kind.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granaryd_process.h"

namespace granary {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using testing::WriteSourceFile;

TEST(Config, YamlOverridesDefaultsKeyByKey) {
  GranarydConfig config = DefaultGranarydConfig();
  std::string default_socket = config.socket_path;
  ASSERT_TRUE(ApplyConfigYaml("capacity: 2GiB\nlisten: 0.0.0.0:9000\ncache_dirs: /nvme\n"
                              "prewarm_parallelism: 16\nfill_parallelism: 2\ngroup: rack7\n",
                              "test.yaml", &config)
                  .ok());
  EXPECT_EQ(config.capacity_bytes, 2ull << 30);
  EXPECT_EQ(config.listen, "0.0.0.0:9000");
  EXPECT_EQ(config.cache_dirs, std::vector<std::string>{"/nvme"});
  EXPECT_EQ(config.prewarm_parallelism, 16u);
  EXPECT_EQ(config.fill_parallelism, 2u);
  EXPECT_EQ(config.group, "rack7");
  EXPECT_EQ(config.socket_path, default_socket);
  EXPECT_TRUE(ApplyConfigYaml("", "empty.yaml", &config).ok());
}

TEST(Config, ErrorsNameOriginKeyAndValue) {
  GranarydConfig config;
  absl::Status status = ApplyConfigYaml("capacity: huge\n", "my.yaml", &config);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("my.yaml: key 'capacity'"), absl::string_view::npos);
  EXPECT_NE(status.message().find("huge"), absl::string_view::npos);
  status = ApplyConfigYaml("socket: [a, b]\n", "my.yaml", &config);
  EXPECT_NE(status.message().find("'socket'"), absl::string_view::npos) << status;
  status = ApplyConfigFile("/no/such.yaml", &config);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
}

TEST(Config, S3TimeoutsAreMillisecondsWithinBounds) {
  GranarydConfig config = DefaultGranarydConfig();
  EXPECT_EQ(config.s3_connect_timeout_ms, 5000u);
  EXPECT_EQ(config.s3_request_timeout_ms, 60000u);
  ASSERT_TRUE(ApplyConfigYaml("s3_connect_timeout_ms: 250\ns3_request_timeout_ms: 2000\n",
                              "s3.yaml", &config)
                  .ok());
  EXPECT_EQ(config.s3_connect_timeout_ms, 250u);
  EXPECT_EQ(config.s3_request_timeout_ms, 2000u);
  absl::Status status = ApplyConfigYaml("s3_request_timeout_ms: 0\n", "s3.yaml", &config);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("s3.yaml: key 's3_request_timeout_ms'")) << status;
  EXPECT_THAT(status.message(), HasSubstr("0")) << status;
}

TEST(Config, LocalityGossipKeysAreWithinBounds) {
  GranarydConfig config = DefaultGranarydConfig();
  EXPECT_EQ(config.locality_period_ms, 1000u);
  EXPECT_EQ(config.locality_max_age_seconds, 30u);
  ASSERT_TRUE(ApplyConfigYaml("locality_period_ms: 5000\nlocality_max_age_seconds: 120\n", "g.yaml",
                              &config)
                  .ok());
  EXPECT_EQ(config.locality_period_ms, 5000u);
  EXPECT_EQ(config.locality_max_age_seconds, 120u);
  // Gossip every 10 ms would be a storm; a maximum age of 0 would show nothing.
  absl::Status status = ApplyConfigYaml("locality_period_ms: 10\n", "g.yaml", &config);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("g.yaml: key 'locality_period_ms'")) << status;
  status = ApplyConfigYaml("locality_max_age_seconds: 0\n", "g.yaml", &config);
  EXPECT_THAT(status.message(), HasSubstr("g.yaml: key 'locality_max_age_seconds'")) << status;
}

TEST(Config, ManifestMemoryIsWholeMebibytesAndNeverNone) {
  GranarydConfig config = DefaultGranarydConfig();
  EXPECT_EQ(config.manifest_memory_mib, 1024u);
  ASSERT_TRUE(ApplyConfigYaml("manifest_memory_mib: 64\n", "m.yaml", &config).ok());
  EXPECT_EQ(config.manifest_memory_mib, 64u);
  for (const char* bad : {"manifest_memory_mib: 0\n", "manifest_memory_mib: 1GiB\n"}) {
    absl::Status status = ApplyConfigYaml(bad, "m.yaml", &config);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(status.message(), HasSubstr("m.yaml: key 'manifest_memory_mib'")) << status;
  }
}

TEST(Config, PrewarmLimitsOfUsersAreBoundedAndTheShareIsAFraction) {
  GranarydConfig config = DefaultGranarydConfig();
  EXPECT_EQ(config.max_prewarms, 8u);
  EXPECT_EQ(config.max_prewarms_per_user, 2u);
  EXPECT_EQ(config.prewarm_user_share, 0.25);
  ASSERT_TRUE(
      ApplyConfigYaml("max_prewarms: 3\nmax_prewarms_per_user: 1\nprewarm_user_share: 0.5\n",
                      "p.yaml", &config)
          .ok());
  EXPECT_EQ(config.max_prewarms, 3u);
  EXPECT_EQ(config.max_prewarms_per_user, 1u);
  EXPECT_EQ(config.prewarm_user_share, 0.5);
  for (const char* bad :
       {"max_prewarms: 0\n", "max_prewarms_per_user: many\n", "prewarm_user_share: 0\n",
        "prewarm_user_share: 1.5\n", "prewarm_user_share: 25%\n"}) {
    absl::Status status = ApplyConfigYaml(bad, "p.yaml", &config);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(status.message(), HasSubstr("p.yaml: key '")) << status;
  }
  absl::Status share = ApplyConfigYaml("prewarm_user_share: 2\n", "p.yaml", &config);
  EXPECT_THAT(share.message(), HasSubstr("'2' is not a fraction from 0.01 to 1")) << share;
}

TEST(Config, S3EndpointProfilesAreAMappingOfEndpointsToNames) {
  GranarydConfig config = DefaultGranarydConfig();
  ASSERT_TRUE(ApplyConfigYaml("s3_endpoint_profiles:\n  \"http://10.0.0.5:9000\": minio\n",
                              "s3.yaml", &config)
                  .ok());
  EXPECT_EQ(config.s3_endpoint_profiles,
            (std::map<std::string, std::string>{{"http://10.0.0.5:9000", "minio"}}));
  absl::Status status = ApplyConfigYaml("s3_endpoint_profiles: minio\n", "s3.yaml", &config);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("s3.yaml: key 's3_endpoint_profiles': expected a mapping"))
      << status;
  status = ApplyConfigYaml("s3_endpoint_profiles: {\"http://h:1\": \"\"}\n", "s3.yaml", &config);
  EXPECT_THAT(status.message(), HasSubstr("endpoint 'http://h:1' has an empty profile name"))
      << status;
}

// How many of `misses` consecutive misses would try peers first.
int PeerFirstCount(FetchSpeeds& speeds, int misses) {
  int peer_first = 0;
  for (int i = 0; i < misses; ++i) peer_first += speeds.PreferPeers() ? 1 : 0;
  return peer_first;
}

TEST(FetchSpeeds, PeersWhileNotSlowerThanTheSourceAndOneProbeOfTheOtherPathIn32) {
  using std::chrono::milliseconds;
  constexpr uint64_t kMiB = 1 << 20;
  FetchSpeeds speeds;
  EXPECT_EQ(PeerFirstCount(speeds, 32), 31);  // Unmeasured: peers, one probe of the source.
  speeds.Record(FetchSpeeds::Path::kSource, 4 * kMiB, milliseconds(20), 1);
  speeds.Record(FetchSpeeds::Path::kPeer, 4 * kMiB, milliseconds(24), 1);  // Within the slack.
  EXPECT_EQ(PeerFirstCount(speeds, 64), 62);
  for (int i = 0; i < 30; ++i) {
    speeds.Record(FetchSpeeds::Path::kPeer, 4 * kMiB, milliseconds(80), 1);  // The link got slow.
  }
  EXPECT_EQ(PeerFirstCount(speeds, 64), 2);  // The source, and probes of the peers.
  // Eight at once, 100 ms each: 12.5 ms of the link per fetch, faster than the source.
  for (int i = 0; i < 30; ++i) {
    speeds.Record(FetchSpeeds::Path::kPeer, 4 * kMiB, milliseconds(100), 8);
  }
  EXPECT_EQ(PeerFirstCount(speeds, 64), 62);
}

TEST(FetchSpeeds, AFetchCountsTheFetchesInFlightOnItsPathWhenItBegins) {
  FetchSpeeds speeds;
  FetchSpeeds::Fetch first = speeds.Begin(FetchSpeeds::Path::kSource);
  FetchSpeeds::Fetch second = speeds.Begin(FetchSpeeds::Path::kSource);
  FetchSpeeds::Fetch peer = speeds.Begin(FetchSpeeds::Path::kPeer);
  EXPECT_EQ(first.concurrent, 1u);
  EXPECT_EQ(second.concurrent, 2u);
  EXPECT_EQ(peer.concurrent, 1u);
  speeds.End(first, 0);
  speeds.End(second, 0);
  speeds.End(peer, 0);
  EXPECT_EQ(speeds.Begin(FetchSpeeds::Path::kSource).concurrent, 1u);
}

TEST(PosixSource, RootOfAcceptsPosixUrlsAndAbsolutePathsOnly) {
  EXPECT_EQ(*PosixRootOf("posix:///data/set/"), "/data/set");
  EXPECT_EQ(*PosixRootOf("/data"), "/data");
  EXPECT_EQ(*PosixRootOf("/"), "/");
  EXPECT_FALSE(PosixRootOf("s3://bucket/prefix").ok());
  EXPECT_FALSE(PosixRootOf("data").ok());
  EXPECT_FALSE(PosixRootOf("posix://relative").ok());
}

// Every part asks the one place that tells source kinds apart.
TEST(SourceKind, TheFormNamesTheKindAndEachKindNamesItsPaths) {
  EXPECT_EQ(KindOf("s3://bucket/prefix"), SourceKind::kS3);
  EXPECT_EQ(KindOf("posix:///data"), SourceKind::kPosix);
  EXPECT_EQ(KindOf("/data"), SourceKind::kPosix);
  EXPECT_EQ(KindOf("data"), SourceKind::kPosix);  // PosixRootOf refuses it.

  EXPECT_EQ(*CanonicalSource("/data/set/"), "/data/set/");
  absl::StatusOr<std::string> s3 = CanonicalSource("s3://bucket/prefix/?region=eu-west-1");
  ASSERT_TRUE(s3.ok()) << s3.status();
  EXPECT_EQ(*CanonicalSource(*s3), *s3);
  EXPECT_EQ(CanonicalSource("s3://").status().code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(SourcePathOf("posix:///data/set/", "a/b.jpg"), "/data/set/a/b.jpg");
  EXPECT_EQ(SourcePathOf("/", "a"), "/a");
  EXPECT_EQ(SourcePathOf("/data", ""), "/data");
  EXPECT_EQ(SourcePathOf("s3://bucket/prefix/", "a/b.jpg"), "s3://bucket/prefix/a/b.jpg");
  EXPECT_EQ(SourcePathOf("relative", "a"), "relative");
}

TEST(PosixScanner, RelativeSymlinksAreKeptWhileTheyStayInside) {
  const std::vector<std::string> roots = {"/data/set"};
  EXPECT_EQ(InTreeSymlinkTarget("a/link", "b", roots), "b");
  EXPECT_EQ(InTreeSymlinkTarget("a/link", "../b", roots), "../b");
  EXPECT_EQ(InTreeSymlinkTarget("a/b/link", "../../c/./d", roots), "../../c/./d");
  EXPECT_EQ(InTreeSymlinkTarget("link", "../outside", roots), std::nullopt);
  EXPECT_EQ(InTreeSymlinkTarget("a/link", "../../outside", roots), std::nullopt);
  EXPECT_EQ(InTreeSymlinkTarget("a/link", "b/../../../x", roots), std::nullopt);
  EXPECT_EQ(InTreeSymlinkTarget("a/link", "", roots), std::nullopt);
}

TEST(PosixScanner, AbsoluteSymlinksInsideAreMadeRelative) {
  const std::vector<std::string> roots = {"/data/set", "/mnt/real/set"};
  EXPECT_EQ(InTreeSymlinkTarget("a/link", "/data/set/a/b/c", roots), "b/c");
  EXPECT_EQ(InTreeSymlinkTarget("a/b/link", "/data/set/x/y", roots), "../../x/y");
  EXPECT_EQ(InTreeSymlinkTarget("link", "/data/set/x", roots), "x");
  EXPECT_EQ(InTreeSymlinkTarget("a/link", "/data/set", roots), "..");
  EXPECT_EQ(InTreeSymlinkTarget("link", "/data/set/", roots), ".");
  EXPECT_EQ(InTreeSymlinkTarget("a/link", "/data/./set//a/../z", roots), "../z");
  EXPECT_EQ(InTreeSymlinkTarget("a/link", "/../data/set/a", roots), ".");
  EXPECT_EQ(InTreeSymlinkTarget("a/link", "/mnt/real/set/q", roots), "../q");
  EXPECT_EQ(InTreeSymlinkTarget("a/link", "/etc/passwd", roots), std::nullopt);
  EXPECT_EQ(InTreeSymlinkTarget("a/link", "/data/settle/x", roots), std::nullopt);
  EXPECT_EQ(InTreeSymlinkTarget("a/link", "/data/set/../other", roots), std::nullopt);
}

// Everything the mount shows of an entry is recorded: link counts, a
// directory's size, user.* attributes, times before 1970; and what is left
// out is listed with its reason.
TEST(PosixScanner, RecordsLinksAttributesAndWhatItSkips) {
  TempDir dir;
  const std::string root = dir.path();
  WriteSourceFile(root, "a/file", "bytes");
  ASSERT_EQ(::link((root + "/a/file").c_str(), (root + "/linked").c_str()), 0);
  ASSERT_EQ(::symlink((root + "/a/file").c_str(), (root + "/a/absolute").c_str()), 0);
  ASSERT_EQ(::symlink("/etc/passwd", (root + "/outside").c_str()), 0);
  ASSERT_EQ(::mkfifo((root + "/a/pipe").c_str(), 0644), 0);
  ASSERT_EQ(::setxattr((root + "/a/file").c_str(), "user.origin", "cam1", 4, 0), 0);
  ASSERT_EQ(::setxattr((root + "/a").c_str(), "user.label", "", 0, 0), 0);
  const struct timespec before_1970[2] = {{-2, 250'000'000}, {-2, 250'000'000}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (root + "/linked").c_str(), before_1970, 0), 0);

  auto tree = ScanPosixTree(root, 4);
  ASSERT_TRUE(tree.ok()) << tree.status();
  std::map<std::string, ManifestEntry> by_path;
  for (const ManifestEntry& entry : tree->entries) by_path[entry.path] = entry;
  ASSERT_EQ(by_path.count("a/file"), 1u);
  EXPECT_EQ(by_path["a/file"].nlink, 2u);
  EXPECT_EQ(by_path["linked"].inode, by_path["a/file"].inode);
  EXPECT_EQ(by_path["linked"].mtime_ns, -1'750'000'000);
  EXPECT_EQ(by_path["a/file"].xattrs(), (std::vector<ExtendedAttribute>{{"user.origin", "cam1"}}));
  EXPECT_EQ(by_path["a"].xattrs(), (std::vector<ExtendedAttribute>{{"user.label", ""}}));
  struct stat st;
  ASSERT_EQ(::stat((root + "/a").c_str(), &st), 0);
  EXPECT_EQ(by_path["a"].size, static_cast<uint64_t>(st.st_size));
  EXPECT_EQ(by_path["a"].nlink, st.st_nlink);
  ASSERT_EQ(by_path.count("a/absolute"), 1u);
  EXPECT_EQ(by_path["a/absolute"].symlink_target(), "file");
  EXPECT_EQ(by_path.count("outside"), 0u);
  EXPECT_EQ(by_path.count("a/pipe"), 0u);

  ASSERT_EQ(tree->skipped.count, 2u);
  EXPECT_EQ(tree->skipped.listed[0].path, "a/pipe");
  EXPECT_THAT(tree->skipped.listed[0].reason, HasSubstr("FIFO"));
  EXPECT_EQ(tree->skipped.listed[1].path, "outside");
  EXPECT_THAT(tree->skipped.listed[1].reason, HasSubstr("/etc/passwd leaves the source"));
}

TEST(PosixScanner, NamesAreBytes) {
  TempDir dir;
  const std::string latin1 = "caf\xe9.jpg";
  WriteSourceFile(dir.path(), latin1, "x");
  auto tree = ScanPosixTree(dir.path(), 2);
  ASSERT_TRUE(tree.ok()) << tree.status();
  auto manifest = Manifest::Build({"ds", dir.path(), 1 << 20}, tree->entries);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  ASSERT_TRUE(manifest->Find(latin1).has_value());
  v1::ManifestEntry wire;
  manifest->entries()[*manifest->Find(latin1)].ToProto(&wire);
  std::string encoded;
  ASSERT_TRUE(wire.SerializeToString(&encoded));
  v1::ManifestEntry parsed;
  ASSERT_TRUE(parsed.ParseFromString(encoded));
  EXPECT_EQ(parsed.path(), latin1);
}

TEST(PosixScanner, ScansATreeInParallelCompletely) {
  TempDir dir;
  for (int d = 0; d < 50; ++d) {
    for (int f = 0; f < 100; ++f) {
      // A char, not "d": GCC 12 at -O3 warns falsely (-Wrestrict) on a string
      // literal + std::string.
      WriteSourceFile(dir.path(), 'd' + std::to_string(d) + "/s/f" + std::to_string(f),
                      std::string(f % 40, 'x'));
    }
  }
  // How fast registration scans is bench/server's BM_RegisterFiles.
  auto entries = ScanPosixTree(dir.path(), 8);
  ASSERT_TRUE(entries.ok()) << entries.status();
  size_t files = 0, dirs = 0;
  for (const ManifestEntry& entry : entries->entries) {
    (entry.type == EntryType::kFile ? files : dirs)++;
  }
  EXPECT_EQ(files, 5000u);
  EXPECT_EQ(dirs, 1u + 50 + 50);
}

TEST(PosixScanner, MissingRootIsNotFound) {
  auto entries = ScanPosixTree("/no/such/dir", 4);
  EXPECT_EQ(entries.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(entries.status().message().find("/no/such/dir"), absl::string_view::npos);
}

TEST(Prewarm, SelectFilesTakesDirectoriesWholeAndOnlyThem) {
  ManifestEntries entries;
  auto add = [&](std::string path, EntryType type) {
    ManifestEntry entry;
    entry.path = std::move(path);
    entry.type = type;
    entries.push_back(std::move(entry));
  };
  add("", EntryType::kDirectory);
  add("a", EntryType::kDirectory);
  add("a/x", EntryType::kFile);
  add("a/y/z", EntryType::kFile);
  add("a/y", EntryType::kDirectory);
  add("a-b", EntryType::kFile);
  add("ab", EntryType::kFile);
  add("b", EntryType::kFile);
  auto manifest = Manifest::Build({"d", "/src", 1 << 20}, entries);
  ASSERT_TRUE(manifest.ok());
  auto paths_of = [&](std::vector<std::string> paths) {
    std::vector<std::string> out;
    absl::StatusOr<std::vector<uint64_t>> selected = SelectFiles(*manifest, paths);
    EXPECT_TRUE(selected.ok()) << selected.status();
    for (uint64_t id : selected.value_or(std::vector<uint64_t>{})) {
      out.push_back(manifest->entries()[id].path);
    }
    return out;
  };
  EXPECT_EQ(paths_of({"a"}), (std::vector<std::string>{"a/x", "a/y/z"}));
  EXPECT_EQ(paths_of({"a/y/", "b"}), (std::vector<std::string>{"a/y/z", "b"}));
  EXPECT_EQ(paths_of({}).size(), 5u);
  EXPECT_EQ(SelectFiles(*manifest, {"c"}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(SelectFiles(*manifest, {"../a"}).status().code(), absl::StatusCode::kInvalidArgument);
}

// A manifest of `files` (path, size), in chunks of 1 MiB.
Manifest FilesManifest(const std::vector<std::pair<std::string, uint64_t>>& files) {
  ManifestEntries entries;
  for (const auto& [path, size] : files) {
    ManifestEntry entry;
    entry.path = path;
    entry.size = size;
    entries.push_back(std::move(entry));
  }
  absl::StatusOr<Manifest> manifest = Manifest::Build({"d", "/src", 1 << 20}, std::move(entries));
  EXPECT_TRUE(manifest.ok()) << manifest.status();
  return *std::move(manifest);
}

// A walk of every chunk of every file of `manifest`.
ChunkWalk WalkOfEveryChunk(const Manifest& manifest) {
  std::vector<ChunkWalk::PlannedChunk> chunks;
  for (uint64_t id = 0; id < manifest.entries().size(); ++id) {
    for (uint32_t index = 0; index < ChunkCount(manifest.entries()[id].size, 1 << 20); ++index) {
      chunks.push_back({id, index, 0});
    }
  }
  return ChunkWalk(std::move(chunks), manifest.entries().size());
}

// What `walk` hands out until it has no more, as "path#chunk".
std::vector<std::string> WalkPaths(const Manifest& manifest, ChunkWalk& walk) {
  std::vector<std::string> paths;
  for (std::optional<size_t> next = walk.Next(); next.has_value(); next = walk.Next()) {
    paths.push_back(absl::StrFormat("%s#%d", manifest.entries()[walk.chunk(*next).file_id].path,
                                    walk.chunk(*next).chunk_index));
  }
  return paths;
}

TEST(Prewarm, AMissPutsTheRestOfItsDirectoryFirstButNoOtherDirectory) {
  const Manifest manifest = FilesManifest({{"images/a/1", 10},
                                           {"images/a/2", 10},
                                           {"images/a/3", 10},
                                           {"images/b/1", 10},
                                           {"shards/s0", 3 << 20}});  // Three chunks.
  const uint64_t version = manifest.version();

  ChunkWalk in_order = WalkOfEveryChunk(manifest);
  EXPECT_EQ(
      WalkPaths(manifest, in_order),
      (std::vector<std::string>{"images/a/1#0", "images/a/2#0", "images/a/3#0", "images/b/1#0",
                                "shards/s0#0", "shards/s0#1", "shards/s0#2"}));

  ChunkWalk after_a_miss = WalkOfEveryChunk(manifest);
  after_a_miss.Prefer(manifest, {version, *manifest.Find("images/a/2"), 0});
  EXPECT_EQ(
      WalkPaths(manifest, after_a_miss),
      (std::vector<std::string>{"images/a/3#0", "images/a/1#0", "images/a/2#0", "images/b/1#0",
                                "shards/s0#0", "shards/s0#1", "shards/s0#2"}));

  // The last file of the images: the shards after it are not its neighbours.
  ChunkWalk at_the_end = WalkOfEveryChunk(manifest);
  ASSERT_EQ(at_the_end.Next(), 0u);
  at_the_end.Prefer(manifest, {version, *manifest.Find("images/b/1"), 0});
  EXPECT_EQ(WalkPaths(manifest, at_the_end),
            (std::vector<std::string>{"images/a/2#0", "images/a/3#0", "images/b/1#0", "shards/s0#0",
                                      "shards/s0#1", "shards/s0#2"}));

  // Within a file, the chunks after the miss come first; a failed file's
  // chunks are skipped.
  ChunkWalk in_a_shard = WalkOfEveryChunk(manifest);
  in_a_shard.Prefer(manifest, {version, *manifest.Find("shards/s0"), 0});
  ASSERT_EQ(in_a_shard.Next(), 5u);
  EXPECT_TRUE(in_a_shard.MarkFailed(*manifest.Find("shards/s0")));
  EXPECT_FALSE(in_a_shard.MarkFailed(*manifest.Find("shards/s0")));
  EXPECT_EQ(
      WalkPaths(manifest, in_a_shard),
      (std::vector<std::string>{"images/a/1#0", "images/a/2#0", "images/a/3#0", "images/b/1#0"}));
}

TEST(Prewarm, WhileReadersMissAFillIsHandedOnlyTheirNeighbours) {
  const Manifest manifest = FilesManifest({{"a/1", 1}, {"a/2", 1}, {"a/3", 1}, {"b/1", 1}});
  ChunkWalk walk = WalkOfEveryChunk(manifest);
  const auto only_preferred = ChunkWalk::Order::kPreferredOnly;

  EXPECT_FALSE(walk.HasPreferred());
  EXPECT_EQ(walk.Next(only_preferred), std::nullopt) << "no miss yet";
  walk.Prefer(manifest, {manifest.version(), *manifest.Find("a/1"), 0});
  EXPECT_TRUE(walk.HasPreferred());
  EXPECT_EQ(walk.Next(only_preferred), *manifest.Find("a/2"));
  EXPECT_EQ(walk.Next(only_preferred), *manifest.Find("a/3"));
  EXPECT_EQ(walk.Next(only_preferred), std::nullopt) << "b/ is not a/'s neighbour";
  EXPECT_FALSE(walk.Exhausted());
  EXPECT_EQ(walk.Next(), *manifest.Find("a/1")) << "the walk in order, once readers stop";
  EXPECT_EQ(walk.Next(), *manifest.Find("b/1"));
  EXPECT_TRUE(walk.Exhausted());
  EXPECT_EQ(walk.Next(), std::nullopt);
}

TEST(Prewarm, AMissPrefersAtMostKPreferredChunksOfItsDirectory) {
  std::vector<std::pair<std::string, uint64_t>> files;
  for (size_t i = 0; i < ChunkWalk::kPreferredChunks + 10; ++i) {
    files.emplace_back(absl::StrFormat("d/%04d", i), 1);
  }
  const Manifest manifest = FilesManifest(files);
  ChunkWalk walk = WalkOfEveryChunk(manifest);
  walk.Prefer(manifest, {manifest.version(), 2, 0});
  for (size_t i = 0; i < ChunkWalk::kPreferredChunks; ++i) EXPECT_EQ(walk.Next(), 3 + i);
  EXPECT_EQ(walk.Next(), 0u) << "then the walk in order";
}

store::StoreOptions SmallStore(const TempDir& dir) {
  store::StoreOptions options;
  options.directories = {dir.path() + "/cache"};
  options.index_path = dir.path() + "/index";
  options.capacity_bytes = 64 << 20;
  options.max_chunk_bytes = 1 << 20;
  return options;
}

TEST(WriteBehind, ServesChunksFromMemoryUntilTheStoreHoldsThem) {
  TempDir dir;
  auto store = store::ChunkStore::Open(SmallStore(dir));
  ASSERT_TRUE(store.ok()) << store.status();
  ServerMetrics metrics;
  WriteBehind writes(store->get(), &metrics, 8 << 20, 2);
  std::vector<ChunkKey> keys;
  for (uint32_t i = 0; i < 20; ++i) {
    keys.push_back({7, i, 0});
    writes.Store(keys.back(), 1 << 20, std::make_shared<const std::string>(50000, 'a' + i % 26));
  }
  // Each key is either still waiting (and served from memory) or stored.
  for (uint32_t i = 0; i < 20; ++i) {
    WriteBehind::ChunkData pending = writes.Pending(keys[i]);
    EXPECT_TRUE((pending != nullptr && *pending == std::string(50000, 'a' + i % 26)) ||
                (*store)->Contains(keys[i]))
        << i;
  }
  writes.Drain();
  for (uint32_t i = 0; i < 20; ++i) {
    EXPECT_EQ(writes.Pending(keys[i]), nullptr);
    absl::StatusOr<std::string> stored = (*store)->Read(keys[i]);
    ASSERT_TRUE(stored.ok()) << stored.status();
    EXPECT_EQ(*stored, std::string(50000, 'a' + i % 26));
  }
  EXPECT_EQ(metrics.write_behind_bytes.load(), 0);
  EXPECT_EQ(metrics.write_behind_dropped.load(), 0u);
}

TEST(WriteBehind, AChunkOverTheQueuesBoundIsServedButNotStored) {
  TempDir dir;
  auto store = store::ChunkStore::Open(SmallStore(dir));
  ASSERT_TRUE(store.ok()) << store.status();
  ServerMetrics metrics;
  {
    // No writer: what is queued stays queued.
    WriteBehind writes(store->get(), &metrics, 100000, 0);
    writes.Store({1, 1, 0}, 1 << 20, std::make_shared<const std::string>(80000, 'x'));
    writes.Store({1, 2, 0}, 1 << 20, std::make_shared<const std::string>(30000, 'y'));
    EXPECT_NE(writes.Pending({1, 1, 0}), nullptr);
    EXPECT_EQ(writes.Pending({1, 2, 0}), nullptr);
    EXPECT_EQ(metrics.write_behind_dropped.load(), 1u);
    EXPECT_EQ(metrics.write_behind_bytes.load(), 80000);
  }
  EXPECT_FALSE((*store)->Contains({1, 2, 0}));
}

TEST(WriteBehind, BlocksWaitingServeTheRangesInsideThemThenTheStoreHoldsThemInPart) {
  TempDir dir;
  auto store = store::ChunkStore::Open(SmallStore(dir));
  ASSERT_TRUE(store.ok()) << store.status();
  ServerMetrics metrics;
  const ChunkKey key{8, 1, 0};
  constexpr uint32_t kChunkLength = 1 << 20;
  std::string chunk(kChunkLength, 0);
  for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = static_cast<char>(i * 7 + i / 4096);
  auto blocks = std::make_shared<const std::string>(chunk.substr(8192, 16384));
  {
    // No writer: what is queued stays queued.
    WriteBehind writes(store->get(), &metrics, 8 << 20, 0);
    writes.StoreBlocks(key, 1 << 20, kChunkLength, 8192, blocks);
    // The same blocks again, or fewer of them, queue nothing more.
    writes.StoreBlocks(key, 1 << 20, kChunkLength, 12288,
                       std::make_shared<const std::string>(chunk.substr(12288, 4096)));
    EXPECT_EQ(metrics.write_behind_bytes.load(), 16384);
    EXPECT_EQ(writes.Pending(key), nullptr) << "blocks are not the whole chunk";
    WriteBehind::Blocks inside = writes.PendingBlocks(key, 10000, 20000);
    EXPECT_EQ(inside.data, blocks);
    EXPECT_EQ(inside.offset, 8192u);
    EXPECT_EQ(writes.PendingBlocks(key, 4096, 10000).data, nullptr);
    EXPECT_EQ(writes.PendingBlocks(key, 20000, 24577).data, nullptr);
  }
  // Stored by a writer: the chunk held in part.
  WriteBehind writes(store->get(), &metrics, 8 << 20, 1);
  writes.StoreBlocks(key, 1 << 20, kChunkLength, 8192, blocks);
  writes.Drain();
  EXPECT_EQ(writes.PendingBlocks(key, 10000, 20000).data, nullptr);
  EXPECT_FALSE((*store)->Contains(key));
  absl::StatusOr<std::string> held = (*store)->ReadRange(key, 10000, 10000);
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(*held, chunk.substr(10000, 10000));
  EXPECT_TRUE(absl::IsNotFound((*store)->ReadRange(key, 4096, 8192).status()));
}

// A manifest budget that no test here reaches.
constexpr Catalog::Options kAmpleMemory{.manifest_memory_bytes = 1 << 30};

// A manifest of dataset "ds" whose one file has `size` bytes: each size
// makes another version.
std::shared_ptr<const Manifest> ManifestOfSize(uint64_t size) {
  ManifestEntries entries(1);
  entries[0].path = "f";
  entries[0].size = size;
  entries[0].mode = 0100644;
  entries[0].mtime_ns = 1;
  auto manifest = Manifest::Build({"ds", "/src", 1 << 20}, std::move(entries));
  EXPECT_TRUE(manifest.ok()) << manifest.status();
  return std::make_shared<const Manifest>(*std::move(manifest));
}

// A release drops an older version and its manifest, durably, but never
// the current one, and leaves the record's date alone: to the catalog
// exchange, the records before and after are equally new, so no server
// takes back what another released, nor pushes its release onto others.
TEST(Catalog, ReleasingAnOlderVersionKeepsTheRecordsDateAndTheCurrentVersion) {
  TempDir dir;
  auto first = ManifestOfSize(1);
  auto second = ManifestOfSize(2);
  {
    auto catalog = Catalog::Open(dir.path() + "/catalog", kAmpleMemory);
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    ASSERT_TRUE((*catalog)->Create(first, 1, v1::FILL_DEFAULT, 1000).ok());
    auto refreshed = (*catalog)->AddVersion(second, 2000);
    ASSERT_TRUE(refreshed.ok()) << refreshed.status();
    ASSERT_EQ(refreshed->versions_size(), 2);
    EXPECT_EQ(refreshed->versions(0).retired_unix_ms(), 2000);
    EXPECT_EQ(refreshed->versions(1).retired_unix_ms(), 0);
    const v1::CatalogDataset before = *refreshed;

    auto released = (*catalog)->ReleaseVersions("ds", {first->version(), second->version(), 12345});
    ASSERT_TRUE(released.ok()) << released.status();
    EXPECT_EQ(*released, std::vector<uint64_t>{first->version()});
    auto after = (*catalog)->Get("ds");
    ASSERT_TRUE(after.ok());
    ASSERT_EQ(after->versions_size(), 1);
    EXPECT_EQ(after->versions(0).version(), second->version());
    EXPECT_EQ(after->updated_unix_ms(), before.updated_unix_ms());
    EXPECT_FALSE((*catalog)->IsNewer(before));
    EXPECT_FALSE((*catalog)->HasVersion(first->version()));
    EXPECT_TRUE(absl::IsNotFound((*catalog)->GetManifest(first->version()).status()));
    auto unknown = (*catalog)->ReleaseVersions("nope", {first->version()});
    ASSERT_TRUE(unknown.ok());
    EXPECT_TRUE(unknown->empty());
  }
  auto reopened = Catalog::Open(dir.path() + "/catalog", kAmpleMemory);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_FALSE((*reopened)->HasVersion(first->version()));
  auto manifest = (*reopened)->GetManifest(second->version());
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ((*manifest)->version(), second->version());
}

// Going back to an older version's content makes it current again: it is
// no longer retired, and the one it replaces is.
TEST(Catalog, AVersionMadeCurrentAgainIsNoLongerRetired) {
  TempDir dir;
  auto catalog = Catalog::Open(dir.path() + "/catalog", kAmpleMemory);
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  auto first = ManifestOfSize(1);
  ASSERT_TRUE((*catalog)->Create(first, 1, v1::FILL_DEFAULT, 1000).ok());
  ASSERT_TRUE((*catalog)->AddVersion(ManifestOfSize(2), 2000).ok());
  auto back = (*catalog)->AddVersion(first, 3000);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->versions_size(), 2);
  EXPECT_EQ(back->versions(0).retired_unix_ms(), 3000);
  EXPECT_EQ(back->versions(1).version(), first->version());
  EXPECT_EQ(back->versions(1).retired_unix_ms(), 0);
}

// The manifest of dataset `name` with `files` files whose paths (longer
// than a string holds in place) differ by dataset and index.
std::shared_ptr<const Manifest> ManyFilesManifest(const std::string& name, int files) {
  ManifestEntries entries;
  entries.reserve(files);
  for (int i = 0; i < files; ++i) {
    ManifestEntry& entry = entries.emplace_back();
    entry.path = absl::StrFormat("%s/file-%06d.bin", name, i);
    entry.size = static_cast<uint64_t>(i);
    entry.mode = 0100644;
    entry.mtime_ns = i;
  }
  auto manifest = Manifest::Build({name, "/src/" + name, 1 << 20}, std::move(entries));
  EXPECT_TRUE(manifest.ok()) << manifest.status();
  return std::make_shared<const Manifest>(*std::move(manifest));
}

constexpr int kManyFiles = 2000;

// Whether `a` and `b` are one version with the same entries.
void ExpectSameManifest(const Manifest& a, const Manifest& b) {
  EXPECT_EQ(a.version(), b.version());
  ASSERT_EQ(a.entries().size(), b.entries().size());
  for (size_t i = 0; i < a.entries().size(); ++i) {
    EXPECT_EQ(a.entries()[i].path, b.entries()[i].path);
    EXPECT_EQ(a.entries()[i].size, b.entries()[i].size);
    EXPECT_EQ(a.entries()[i].mode, b.entries()[i].mode);
    EXPECT_EQ(a.entries()[i].mtime_ns, b.entries()[i].mtime_ns);
  }
}

// Three datasets over a budget of two and a half manifests: what the
// catalog keeps in memory stays within it, and every manifest still comes
// back whole, loaded again from RocksDB when it was dropped.
TEST(Catalog, ManifestsInMemoryStayWithinTheBudgetAndDroppedOnesLoadAgain) {
  TempDir dir;
  const uint64_t budget = ManyFilesManifest("ds0", kManyFiles)->memory_bytes() * 5 / 2;
  auto catalog = Catalog::Open(dir.path() + "/catalog", {.manifest_memory_bytes = budget});
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  std::vector<uint64_t> versions;
  for (const char* name : {"ds0", "ds1", "ds2"}) {
    std::shared_ptr<const Manifest> manifest = ManyFilesManifest(name, kManyFiles);
    versions.push_back(manifest->version());
    ASSERT_TRUE((*catalog)->Create(std::move(manifest), 1, v1::FILL_DEFAULT, 1000).ok());
    EXPECT_LE((*catalog)->ManifestMemory().bytes, budget);
  }
  EXPECT_EQ((*catalog)->ManifestMemory().manifests, 2u);
  int index = 0;
  for (const char* name : {"ds0", "ds1", "ds2"}) {
    auto manifest = (*catalog)->GetManifest(versions[index++]);
    ASSERT_TRUE(manifest.ok()) << manifest.status();
    ExpectSameManifest(**manifest, *ManyFilesManifest(name, kManyFiles));
    // The one returned is held here; the rest fit.
    EXPECT_LE((*catalog)->ManifestMemory().bytes, budget);
  }
  EXPECT_GT((*catalog)->ManifestMemory().loads, 0u);
}

// A manifest of three pages, written a page to a batch, comes back whole
// after the catalog is opened again.
TEST(Catalog, AManifestWrittenInSeveralBatchesLoadsBackWhole) {
  TempDir dir;
  const std::string path = dir.path() + "/catalog";
  constexpr int kThreePages = 2 * Catalog::kManifestPageEntries + 1;
  std::shared_ptr<const Manifest> manifest = ManyFilesManifest("ds", kThreePages);
  {
    auto catalog =
        Catalog::Open(path, {.manifest_memory_bytes = 1, .manifest_write_batch_bytes = 1});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    ASSERT_TRUE((*catalog)->Create(manifest, 1, v1::FILL_DEFAULT, 1000).ok());
  }
  auto catalog = Catalog::Open(path, {.manifest_memory_bytes = 1});
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  auto loaded = (*catalog)->GetManifest(manifest->version());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectSameManifest(**loaded, *manifest);
}

// Marked pages that no record names (what a crash between a manifest's pages
// and its record leaves) are deleted when the catalog opens; the named stay.
TEST(Catalog, ManifestPagesNoRecordNamesAreDeletedAtOpen) {
  TempDir dir;
  const std::string path = dir.path() + "/catalog";
  std::shared_ptr<const Manifest> named = ManyFilesManifest("ds", kManyFiles);
  {
    auto catalog = Catalog::Open(path, kAmpleMemory);
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    ASSERT_TRUE((*catalog)->Create(named, 1, v1::FILL_DEFAULT, 1000).ok());
  }
  // Catalog.h's layout: "m", the version in 8 bytes and the page in 4,
  // big-endian; "p" and the version mark it as written before its record.
  const std::string unnamed_page = std::string("m\0\0\0\0\0\0\x12\x34\0\0\0\0", 13);
  const std::string pending_mark = std::string("p\0\0\0\0\0\0\x12\x34", 9);
  auto with_raw_db = [&](auto use) {
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), path, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    use(*db);
  };
  with_raw_db([&](rocksdb::DB& db) {
    v1::ManifestPage page;
    named->entries()[0].ToProto(page.add_entries());
    ASSERT_TRUE(db.Put(rocksdb::WriteOptions(), unnamed_page, page.SerializeAsString()).ok());
    ASSERT_TRUE(db.Put(rocksdb::WriteOptions(), pending_mark, "").ok());
  });
  {
    auto catalog = Catalog::Open(path, kAmpleMemory);
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    auto loaded = (*catalog)->GetManifest(named->version());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    ExpectSameManifest(**loaded, *named);
  }
  with_raw_db([&](rocksdb::DB& db) {
    std::string value;
    EXPECT_TRUE(db.Get(rocksdb::ReadOptions(), unnamed_page, &value).IsNotFound());
  });
}

// What a caller holds is never dropped, however far over the budget: asking
// again gives the same manifest, not a second copy. Once let go, it goes
// with the next manifest kept.
TEST(Catalog, AHeldManifestStaysInMemoryOverTheBudget) {
  TempDir dir;
  auto catalog = Catalog::Open(dir.path() + "/catalog", {.manifest_memory_bytes = 1});
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  std::shared_ptr<const Manifest> held = ManyFilesManifest("ds0", kManyFiles);
  const uint64_t held_version = held->version();
  const Manifest* held_address = held.get();
  ASSERT_TRUE((*catalog)->Create(held, 1, v1::FILL_DEFAULT, 1000).ok());
  auto other = ManyFilesManifest("ds1", kManyFiles);
  const uint64_t other_version = other->version();
  ASSERT_TRUE((*catalog)->Create(std::move(other), 1, v1::FILL_DEFAULT, 1000).ok());
  ASSERT_TRUE(
      (*catalog)->Create(ManyFilesManifest("ds2", kManyFiles), 1, v1::FILL_DEFAULT, 1000).ok());
  // ds0 is held and ds2 was kept last; ds1 went.
  EXPECT_EQ((*catalog)->ManifestMemory().manifests, 2u);
  for (int i = 0; i < 2; ++i) {
    auto again = (*catalog)->GetManifest(held_version);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->get(), held_address);
  }
  EXPECT_EQ((*catalog)->ManifestMemory().loads, 0u);

  held.reset();
  ASSERT_TRUE((*catalog)->GetManifest(other_version).ok());
  EXPECT_EQ((*catalog)->ManifestMemory().loads, 1u);
  EXPECT_EQ((*catalog)->ManifestMemory().manifests, 1u);
  auto reloaded = (*catalog)->GetManifest(held_version);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status();
  EXPECT_EQ((*catalog)->ManifestMemory().loads, 2u);
  ExpectSameManifest(**reloaded, *ManyFilesManifest("ds0", kManyFiles));
}

// Only manifests not in memory are loaded: asking for those kept costs no
// load, asking for a dropped one costs one, and using one keeps it over
// those used before it.
TEST(Catalog, OnlyDroppedManifestsAreLoadedAgain) {
  TempDir dir;
  const uint64_t budget = ManyFilesManifest("ds0", kManyFiles)->memory_bytes() * 5 / 2;
  std::vector<uint64_t> versions;
  {
    auto catalog = Catalog::Open(dir.path() + "/catalog", {.manifest_memory_bytes = budget});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    for (const char* name : {"ds0", "ds1", "ds2"}) {
      std::shared_ptr<const Manifest> manifest = ManyFilesManifest(name, kManyFiles);
      versions.push_back(manifest->version());
      ASSERT_TRUE((*catalog)->Create(std::move(manifest), 1, v1::FILL_DEFAULT, 1000).ok());
    }
    // In memory, least recently used first: ds1, ds2.
    auto loads = [&] { return (*catalog)->ManifestMemory().loads; };
    ASSERT_TRUE((*catalog)->GetManifest(versions[2]).ok());
    ASSERT_TRUE((*catalog)->GetManifest(versions[1]).ok());
    EXPECT_EQ(loads(), 0u);
    // ds2, ds1, then ds0 loaded: ds2 goes.
    ASSERT_TRUE((*catalog)->GetManifest(versions[0]).ok());
    EXPECT_EQ(loads(), 1u);
    ASSERT_TRUE((*catalog)->GetManifest(versions[1]).ok());
    ASSERT_TRUE((*catalog)->GetManifest(versions[0]).ok());
    EXPECT_EQ(loads(), 1u);
    ASSERT_TRUE((*catalog)->GetManifest(versions[2]).ok());
    EXPECT_EQ(loads(), 2u);
    EXPECT_EQ((*catalog)->ManifestMemory().manifests, 2u);
  }
  // A reopened catalog holds none until asked.
  auto reopened = Catalog::Open(dir.path() + "/catalog", {.manifest_memory_bytes = budget});
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ((*reopened)->ManifestMemory().manifests, 0u);
  EXPECT_EQ((*reopened)->ManifestMemory().bytes, 0u);
  ASSERT_TRUE((*reopened)->GetManifest(versions[0]).ok());
  ASSERT_TRUE((*reopened)->GetManifest(versions[0]).ok());
  EXPECT_EQ((*reopened)->ManifestMemory().loads, 1u);
  EXPECT_EQ((*reopened)->ManifestMemory().manifests, 1u);
}

}  // namespace
}  // namespace granary
