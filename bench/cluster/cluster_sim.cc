// A simulation of a Granary cluster at sizes that cannot run here (1,000 and
// 10,000 nodes), for the design of today: what each node holds in memory, how
// long a catalog change takes to reach every node, how many bytes a join or a
// leave moves, and how long a cluster-wide Locate takes, under node churn.
//
// What is real and what is modelled:
//   - Placement is real: each group's ring is a PlacementRing built from the
//     simulated members, and bytes moved are computed exactly from the rings'
//     arcs (bench/placement/ring_measures.h).
//   - Sizes are real: the member list's memory is the resident growth of a
//     fresh process building a ClusterMap of the simulated members (with its
//     own group's ring); a manifest entry's memory and its encoded
//     size come from a real Manifest of generated entries; a catalog record's
//     encoded size from a real CatalogDataset.
//   - Catalog propagation is a discrete-event model of CatalogSync, with its
//     constants: the changing node's pusher pool (kMaxParallelExchanges
//     threads, one exchange per peer),
//     each exchange carrying every record both ways and the callee fetching a
//     new manifest from the caller; dead peers still listed hold a pusher for
//     kPeerConnectWait and are retried with its backoff; every node also
//     exchanges with one random peer every 30 s (granaryd's period). The network is a round-trip
//     time and one uplink per node of a given bandwidth, shared in turn by the manifests it serves.
//     Not modelled: CPU (decoding, RocksDB writes), the downlink, switches, packet loss, gRPC's
//     reconnect backoff.
//   - Locate is a model of ClusterStatus::Locate: kMaxParallelPeerCalls calls
//     in flight, one shared deadline of kPeerAnswerWait, a live peer answering in
//     a round trip plus a service time, a dead one holding its call until the
//     deadline.
//   - Published locality is a discrete-event model of LocalityBoard's gossip
//     (SimulateLocality), with its period, maximum age and exchange wait, and
//     the encoded sizes of its messages.
//   - Churn: each minute `churn` of the nodes leave and as many join (a
//     random group, a random weight); a departed node stays listed for
//     `membership_lag` (an etcd lease's TTL).
//
// Prints its results as JSON; cluster_sim.py makes the tables and the plot.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/placement/ring_measures.h"
#include "cache_server/catalog/catalog_sync.h"
#include "cache_server/cluster/peer_stub.h"
#include "cache_server/status/cluster_status.h"
#include "cache_server/status/locality_board.h"
#include "common/cluster/cluster_map.h"
#include "common/cluster/placement_ring.h"
#include "common/dataset/manifest.h"
#include "nlohmann/json.hpp"
#include "proto/granary.pb.h"

namespace granary {
namespace {

using nlohmann::json;

double InSeconds(std::chrono::duration<double> duration) { return duration.count(); }

// What the model takes from the code it models.
const int kPushers = static_cast<int>(CatalogSync::kMaxParallelExchanges);
const double kPushWait = InSeconds(CatalogSync::kPushWait);
const double kFirstRetryBackoff = InSeconds(CatalogSync::kFirstRetryBackoff);
const double kMaxRetryBackoff = InSeconds(CatalogSync::kMaxRetryBackoff);
const double kConnectWait = InSeconds(kPeerConnectWait);
const int kParallelCalls = static_cast<int>(ClusterStatus::kMaxParallelPeerCalls);
const double kAnswerWait = InSeconds(ClusterStatus::kPeerAnswerWait);
// granaryd's catalog exchange period (kCatalogExchangePeriod, server.cc).
constexpr double kExchangePeriod = 30.0;

struct Options {
  std::vector<int> cluster_sizes = {1000, 10000};
  int group_size = 40;
  uint32_t max_weight = 1000;
  int datasets = 1000;
  uint64_t files_per_dataset = 100'000;
  uint64_t new_dataset_files = 10'000'000;
  double churn_per_minute = 0.01;
  int minutes = 10;
  double rtt_ms = 0.2;
  double call_service_ms = 0.1;
  double uplink_gbps = 10;
  double node_cache_tib = 4;
  double membership_lag_s = 10;
  double holdings_per_node = 100;  // Datasets a node holds bytes of.
  uint64_t seed = 7;
};

uint64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * 4096;
}

// ---------------------------------------------------------------- sizes

struct EntrySizes {
  double memory_bytes;   // In a loaded Manifest, per entry.
  double encoded_bytes;  // As GetManifest sends it, per entry.
};

ManifestEntry Directory(std::string path) {
  ManifestEntry entry;
  entry.path = std::move(path);
  entry.type = EntryType::kDirectory;
  entry.mode = 040755;
  return entry;
}

// Generated names as a dataset of images has them: a directory per class.
ManifestEntries GeneratedEntries(uint64_t files) {
  constexpr uint64_t kFilesPerClass = 1000;
  constexpr int64_t kScanTimeNs = 1'700'000'000'000'000'000;
  ManifestEntries entries;
  entries.push_back(Directory(""));
  entries.push_back(Directory("train"));
  for (uint64_t i = 0; i < files; ++i) {
    if (i % kFilesPerClass == 0) {
      entries.push_back(Directory(absl::StrFormat("train/class-%05d", i / kFilesPerClass)));
    }
    ManifestEntry file;
    file.path = absl::StrFormat("train/class-%05d/img-%09d.jpg", i / kFilesPerClass, i);
    file.size = 100'000 + i % 20'000;
    file.mode = 0100644;
    file.mtime_ns = kScanTimeNs + static_cast<int64_t>(i);
    file.uid = 1000;
    file.gid = 1000;
    if (!file.set_device(2049)) std::exit(1);  // 8:1, a real device number.
    file.inode = 1'000'000 + i;
    file.ctime_ns = kScanTimeNs + static_cast<int64_t>(i);
    entries.push_back(std::move(file));
  }
  return entries;
}

// Run first, while the heap is fresh, so that the manifest's growth is its own.
EntrySizes MeasureEntrySizes() {
  constexpr uint64_t kFiles = 200'000;
  const uint64_t before = ResidentBytes();
  auto manifest = Manifest::Build({"sizes", "/data/sizes", 4 << 20}, GeneratedEntries(kFiles));
  const uint64_t after = ResidentBytes();
  if (!manifest.ok()) {
    std::cerr << "cluster_sim: " << manifest.status() << "\n";
    std::exit(1);
  }
  uint64_t encoded = 0;
  for (const ManifestEntry& entry : manifest->entries()) {
    v1::ManifestEntry proto;
    entry.ToProto(&proto);
    encoded += proto.ByteSizeLong();
  }
  const double count = static_cast<double>(manifest->entries().size());
  return {static_cast<double>(after - before) / count, static_cast<double>(encoded) / count};
}

double CatalogRecordEncodedBytes() {
  v1::CatalogDataset record;
  record.set_name("dataset-00123");
  record.set_source("/mnt/datasets/dataset-00123");
  record.set_chunk_size(4 << 20);
  record.set_updated_unix_ms(1'780'000'000'000);
  record.set_replicas(1);
  record.set_fill(v1::FILL_ON_READ);
  v1::CatalogVersion* version = record.add_versions();
  version->set_version(0x0123456789abcdefULL);
  version->set_created_unix_ms(1'780'000'000'000);
  version->set_file_count(100'000);
  version->set_directory_count(101);
  version->set_total_bytes(11'000'000'000);
  version->set_chunk_count(110'000);
  version->set_entry_count(100'101);
  return static_cast<double>(record.ByteSizeLong());
}

// ---------------------------------------------------------------- members

struct SimMember {
  std::string id;
  int group;
  uint32_t weight;
};

std::string GroupName(int group) { return absl::StrCat("rack-", group); }

std::vector<PlacementNode> GroupNodes(const std::vector<SimMember>& members, int group) {
  std::vector<PlacementNode> nodes;
  for (const SimMember& member : members) {
    if (member.group == group) nodes.push_back({member.id, member.weight});
  }
  return nodes;
}

int GroupCount(int cluster_size, const Options& options) {
  return options.group_size > 0 ? std::max(1, cluster_size / options.group_size) : 1;
}

// The simulated members of a cluster of `cluster_size`: the same list for the
// same options, in this process or in a measuring one.
std::vector<SimMember> MakeMembers(int cluster_size, const Options& options,
                                   std::mt19937_64& random) {
  const int groups = GroupCount(cluster_size, options);
  std::vector<SimMember> members;
  for (int n = 0; n < cluster_size; ++n) {
    members.push_back({absl::StrCat("node-", n), n % groups,
                       static_cast<uint32_t>(1 + random() % options.max_weight)});
  }
  return members;
}

// Resident growth from building the ClusterMap of `members` with the first
// member's group's ring built, as that member's granaryd holds it. Only
// meaningful in a fresh process: an older heap's free memory would be reused.
uint64_t MemberListResidentGrowth(const std::vector<SimMember>& members) {
  std::vector<Member> listed;
  for (const SimMember& member : members) {
    listed.push_back({.id = member.id,
                      .address = absl::StrCat("10.", member.group / 250, ".", member.group % 250,
                                              ".", listed.size() % 250, ":7070"),
                      .group = GroupName(member.group),
                      .weight = member.weight});
  }
  const uint64_t before = ResidentBytes();
  auto map = ClusterMap::Build(std::move(listed), GroupName(members.front().group));
  const uint64_t after = ResidentBytes();
  if (!map.ok()) {
    std::cerr << "cluster_sim: " << map.status() << "\n";
    std::exit(1);
  }
  return after - before;
}

// Runs this program again with --measure-member-list and reads its answer.
double MemberListBytesInFreshProcess(int cluster_size, const Options& options) {
  // Resolved here: the shell popen runs would read /proc/self as itself.
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string command = absl::StrCat(self, " --measure-member-list --nodes ", cluster_size,
                                     " --group-size ", options.group_size, " --max-weight ",
                                     options.max_weight, " --seed ", options.seed);
  FILE* child = popen(command.c_str(), "r");
  double bytes = -1;
  if (child == nullptr || fscanf(child, "%lf", &bytes) != 1 || pclose(child) != 0) {
    std::cerr << "cluster_sim: measuring the member list failed: " << command << "\n";
    std::exit(1);
  }
  return bytes;
}

// ---------------------------------------------------------------- churn

struct ChurnResult {
  double leaves = 0, joins = 0;
  double moved_bytes_per_leave = 0, moved_bytes_per_join = 0;
  double moved_over_minimum_mean = 0, moved_over_minimum_worst = 0;
  double moved_bytes_per_minute = 0;
};

// Each churn event changes one group's ring; the bytes it moves are the
// hash space that changed owner times the bytes the group holds (its members
// full, `node_cache` each on average).
ChurnResult SimulateChurn(std::vector<SimMember> members, int groups, const Options& options,
                          std::mt19937_64& random) {
  const double node_cache = options.node_cache_tib * 1024.0 * 1024 * 1024 * 1024;
  const int events = static_cast<int>(members.size() * options.churn_per_minute * options.minutes);
  std::vector<std::vector<PlacementNode>> group_nodes(groups);
  for (const SimMember& member : members) {
    group_nodes[member.group].push_back({member.id, member.weight});
  }
  // Each group's ring as the last change left it, built when first changed.
  std::vector<std::optional<PlacementRing>> rings(groups);
  ChurnResult result;
  double ratio_sum = 0;
  int next_id = static_cast<int>(members.size());
  for (int event = 0; event < events; ++event) {
    const bool leave = event % 2 == 0;
    int group;
    double changed_weight;
    std::vector<PlacementNode> before_nodes;
    if (leave) {
      const size_t index = random() % members.size();
      group = members[index].group;
      changed_weight = members[index].weight;
      before_nodes = group_nodes[group];
      std::erase_if(group_nodes[group],
                    [&](const PlacementNode& node) { return node.id == members[index].id; });
      members.erase(members.begin() + static_cast<std::ptrdiff_t>(index));
    } else {
      group = static_cast<int>(random() % groups);
      changed_weight = static_cast<double>(1 + random() % options.max_weight);
      before_nodes = group_nodes[group];
      members.push_back(
          {absl::StrCat("node-", next_id++), group, static_cast<uint32_t>(changed_weight)});
      group_nodes[group].push_back({members.back().id, members.back().weight});
    }
    const std::vector<PlacementNode>& after_nodes = group_nodes[group];
    if (before_nodes.empty() || after_nodes.empty()) {
      rings[group].reset();
      continue;
    }
    if (!rings[group]) rings[group] = *PlacementRing::Build(before_nodes);
    PlacementRing after = *PlacementRing::Build(after_nodes);
    const double moved_fraction = static_cast<double>(MovedFraction(*rings[group], after));
    const double group_bytes = node_cache * static_cast<double>(before_nodes.size());
    const double minimum_fraction =
        changed_weight / TotalWeight(leave ? before_nodes : after_nodes);
    const double ratio = moved_fraction / minimum_fraction;
    ratio_sum += ratio;
    result.moved_over_minimum_worst = std::max(result.moved_over_minimum_worst, ratio);
    (leave ? result.moved_bytes_per_leave : result.moved_bytes_per_join) +=
        moved_fraction * group_bytes;
    (leave ? result.leaves : result.joins) += 1;
    rings[group] = std::move(after);
  }
  const double counted = result.leaves + result.joins;
  result.moved_bytes_per_minute =
      (result.moved_bytes_per_leave + result.moved_bytes_per_join) / options.minutes;
  if (result.leaves > 0) result.moved_bytes_per_leave /= result.leaves;
  if (result.joins > 0) result.moved_bytes_per_join /= result.joins;
  if (counted > 0) result.moved_over_minimum_mean = ratio_sum / counted;
  return result;
}

// ---------------------------------------------------------------- catalog

struct Propagation {
  double registration_returns_s = 0;         // PushToAll's wait.
  double half_s = 0, most_s = 0, all_s = 0;  // 50%, 99%, 100% of live nodes.
  double origin_sent_bytes = 0;
};

// One change made on node 0 (a registration of `manifest_bytes` of manifest,
// or, with 0, a record change alone such as a removal).
Propagation SimulatePropagation(int cluster_size, const std::vector<bool>& dead,
                                double records_bytes, double manifest_bytes, const Options& options,
                                std::mt19937_64& random) {
  const double rtt = options.rtt_ms / 1000;
  const double service = options.call_service_ms / 1000;
  const double bytes_per_second = options.uplink_gbps * 1e9 / 8;
  const double exchange_wire = rtt + service + 2 * records_bytes / bytes_per_second;

  enum Kind { kPushDone, kPushFailed, kRetryDue, kPeriodic };
  struct Event {
    double time;
    Kind kind;
    int node;
    bool operator>(const Event& other) const { return time > other.time; }
  };
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;

  constexpr double kNever = -1;
  std::vector<double> has_since(cluster_size, kNever);
  std::vector<double> uplink_free(cluster_size, 0);
  has_since[0] = 0;
  int live = 0;
  for (int n = 0; n < cluster_size; ++n) live += dead[n] ? 0 : 1;
  int reached = 1;
  double origin_sent = 0;

  // The callee fetches the manifest from `from`, whose uplink serves one
  // fetch at a time; returns when `to` holds the change.
  auto deliver = [&](int from, double start) {
    double done = start + exchange_wire;
    if (manifest_bytes > 0) {
      const double begin = std::max(done, uplink_free[from]);
      uplink_free[from] = begin + manifest_bytes / bytes_per_second;
      done = uplink_free[from] + rtt;
    }
    if (from == 0) origin_sent += records_bytes + manifest_bytes;
    return done;
  };
  auto mark = [&](int node, double time) {
    if (has_since[node] == kNever) ++reached;
    if (has_since[node] == kNever || time < has_since[node]) has_since[node] = time;
  };

  // The origin's pushes: every peer owed one exchange, kPushers at once, a
  // failed peer owed again after its backoff.
  std::deque<int> owed;
  for (int n = 1; n < cluster_size; ++n) owed.push_back(n);
  int idle_pushers = kPushers;
  std::vector<double> backoff(cluster_size, kFirstRetryBackoff);
  std::vector<bool> settled(cluster_size, false);
  int pushes_settled = 0;
  double all_pushes_settled = kNever;
  auto run_pushers = [&](double now) {
    while (idle_pushers > 0 && !owed.empty()) {
      const int peer = owed.front();
      owed.pop_front();
      --idle_pushers;
      if (dead[peer]) {
        events.push({now + kConnectWait, kPushFailed, peer});
      } else {
        events.push({deliver(0, now), kPushDone, peer});
      }
    }
  };
  auto settle = [&](int peer, double now) {
    if (settled[peer]) return;
    settled[peer] = true;
    if (++pushes_settled == cluster_size - 1) all_pushes_settled = now;
  };
  run_pushers(0);
  std::uniform_real_distribution<double> phase(0, kExchangePeriod);
  for (int n = 0; n < cluster_size; ++n) events.push({phase(random), kPeriodic, n});

  // Runs until every live node holds the change and no later event could
  // bring it to one of them sooner.
  constexpr double kHorizon = 7 * 24 * 3600.0;
  double latest = kHorizon;
  while (!events.empty()) {
    const Event event = events.top();
    events.pop();
    if (event.time > latest) break;
    switch (event.kind) {
      case kPushDone:
        mark(event.node, event.time);
        settle(event.node, event.time);
        ++idle_pushers;
        break;
      case kPushFailed:
        // A failed try settles PushToAll's wait for that peer.
        settle(event.node, event.time);
        ++idle_pushers;
        events.push({event.time + backoff[event.node], kRetryDue, event.node});
        backoff[event.node] = std::min(kMaxRetryBackoff, 2 * backoff[event.node]);
        break;
      case kRetryDue:
        owed.push_back(event.node);
        break;
      case kPeriodic: {
        const int node = event.node;
        events.push({event.time + kExchangePeriod, kPeriodic, node});
        int peer = static_cast<int>(random() % (cluster_size - 1));
        if (peer >= node) ++peer;
        if (dead[node] || dead[peer]) break;
        auto holds = [&](int n) { return has_since[n] != kNever && has_since[n] <= event.time; };
        if (holds(node) && !holds(peer)) mark(peer, deliver(node, event.time));
        if (holds(peer) && !holds(node)) mark(node, deliver(peer, event.time));
        break;
      }
    }
    run_pushers(event.time);
    if (reached == live && latest == kHorizon) {
      latest = 0;
      for (int n = 0; n < cluster_size; ++n) {
        if (!dead[n]) latest = std::max(latest, has_since[n]);
      }
    }
  }
  std::vector<double> reach_times;
  for (int n = 0; n < cluster_size; ++n) {
    if (!dead[n] && has_since[n] != kNever) reach_times.push_back(has_since[n]);
  }
  std::sort(reach_times.begin(), reach_times.end());
  // When the `share` of live nodes held the change (kNever if they did not).
  auto at_share = [&](double share) {
    const size_t index = static_cast<size_t>(share * (live - 1));
    return index < reach_times.size() ? reach_times[index] : kNever;
  };
  Propagation result;
  result.half_s = at_share(0.5);
  result.most_s = at_share(0.99);
  result.all_s = reached == live ? reach_times.back() : kNever;
  result.registration_returns_s =
      all_pushes_settled == kNever ? kPushWait : std::min(kPushWait, all_pushes_settled);
  result.origin_sent_bytes = origin_sent;
  return result;
}

// ---------------------------------------------------------------- locate

struct LocateResult {
  double latency_s = 0;
  double answered_share = 0;  // Of the live peers.
};

LocateResult SimulateLocate(int cluster_size, const std::vector<bool>& dead,
                            const Options& options) {
  const double call = (options.rtt_ms + options.call_service_ms) / 1000;
  std::priority_queue<double, std::vector<double>, std::greater<double>> free_at;
  for (int slot = 0; slot < kParallelCalls; ++slot) free_at.push(0);
  int live = 0, answered = 0;
  double last = 0;
  for (int peer = 1; peer < cluster_size; ++peer) {
    const double start = free_at.top();
    free_at.pop();
    if (!dead[peer]) ++live;
    if (start >= kAnswerWait) {
      free_at.push(start);
      continue;
    }
    const double end = dead[peer] ? kAnswerWait : start + call;
    if (!dead[peer] && end <= kAnswerWait) ++answered;
    last = std::max(last, std::min(end, kAnswerWait));
    free_at.push(std::min(end, kAnswerWait));
  }
  return {last, live > 0 ? static_cast<double>(answered) / live : 1};
}

// ---------------------------------------------------------------- published locality

// What one round of LocalityBoard's gossip carries, encoded as granaryd
// encodes it.
struct GossipSizes {
  double digest_entry;  // One LocalityDigest.
  double heartbeat;     // A heartbeat-only LocalityReport.
  double holding;       // One DatasetHolding of a report.
};

GossipSizes MeasureGossipSizes() {
  constexpr int64_t kNowMs = 1'780'000'000'000;
  v1::LocalityDigest digest;
  digest.set_node_id("node-01234");
  digest.set_published_unix_ms(kNowMs);
  digest.set_heartbeat_unix_ms(kNowMs + 1000);
  v1::LocalityReport heartbeat;
  heartbeat.set_node_id("node-01234");
  heartbeat.set_group("rack-123");
  heartbeat.set_published_unix_ms(kNowMs);
  heartbeat.set_heartbeat_unix_ms(kNowMs + 1000);
  heartbeat.set_age_ms(1500);
  heartbeat.set_heartbeat_only(true);
  v1::LocalityReport report;
  v1::DatasetHolding* holding = report.add_holdings();
  holding->set_name("dataset-00123");
  holding->set_version(0x0123456789abcdefULL);
  holding->set_cached_bytes(uint64_t{123} << 30);
  // The field's tag and length in the report.
  return {static_cast<double>(digest.ByteSizeLong()) + 2,
          static_cast<double>(heartbeat.ByteSizeLong()) + 2,
          static_cast<double>(report.ByteSizeLong())};
}

struct LocalityResult {
  // Until node 0's changed holdings are held by 50%, 99%, 100% of live nodes.
  double half_s = 0, most_s = 0, all_s = 0;
  // Of live nodes' reports as other live nodes hold them when a Locate reads
  // them: their ages, and the share recent enough to be shown.
  double age_mean_s = 0, age_p99_s = 0, age_max_s = 0;
  double live_shown_share = 0;
  // Of departed nodes still listed: the share a Locate still shows.
  double departed_shown_share = 0;
  double bytes_per_node_per_s = 0;  // Sent and received, in the steady state.
};

// A discrete-event model of LocalityBoard: every node, every period, calls
// one random listed peer, which adopts the caller's report and answers with
// the reports newer than the caller holds (only heartbeats when holdings did
// not change), leaving out those older than the maximum age. A call to a
// departed node costs the caller kExchangeWait before its next round. Departed
// nodes stopped at random times in the last `membership_lag` before the
// measurement. A heartbeat's age is the time since its node made it, which is
// what the board's carried ages add up to.
LocalityResult SimulateLocality(int cluster_size, const std::vector<bool>& departed,
                                const GossipSizes& sizes, const Options& options,
                                std::mt19937_64& random) {
  const double period = InSeconds(LocalityBoard::Options().period);
  const double max_age = InSeconds(LocalityBoard::Options().max_age);
  const double exchange_wait = InSeconds(LocalityBoard::kExchangeWait);
  const double call = (options.rtt_ms + options.call_service_ms) / 1000;
  const double warm_up = 60, measured_from = 30, horizon = 240;
  constexpr float kUnknown = -1e9f;
  const size_t n = static_cast<size_t>(cluster_size);
  // heartbeat[i * n + j]: the latest heartbeat of node j that node i holds.
  std::vector<float> heartbeat(n * n, kUnknown);
  std::vector<size_t> known(n, 0);
  std::vector<double> stopped(n, horizon * 2);
  std::uniform_real_distribution<double> uniform(0, 1);
  for (size_t i = 0; i < n; ++i) {
    if (departed[i]) stopped[i] = warm_up - options.membership_lag_s * uniform(random);
  }
  constexpr double kNever = -1;
  std::vector<double> has_change(n, kNever);
  size_t live = 0, reached = 0;
  for (size_t i = 0; i < n; ++i) live += departed[i] ? 0 : 1;

  using Round = std::pair<double, size_t>;
  std::priority_queue<Round, std::vector<Round>, std::greater<Round>> rounds;
  for (size_t i = 0; i < n; ++i) rounds.push({period * uniform(random), i});
  double steady_bytes = 0;
  bool changed = false;
  LocalityResult result;
  auto measure_ages = [&](double now) {
    std::vector<double> ages;
    size_t live_pairs = 0, live_shown = 0, departed_pairs = 0, departed_shown = 0;
    for (int sample = 0; sample < 100; ++sample) {
      size_t observer = 0;
      while (departed[observer = random() % n]) {
      }
      for (size_t m = 0; m < n; ++m) {
        if (m == observer) continue;
        const double age = now - heartbeat[observer * n + m];
        const bool shown = age <= max_age;
        if (departed[m]) {
          ++departed_pairs;
          departed_shown += shown ? 1 : 0;
          continue;
        }
        ++live_pairs;
        live_shown += shown ? 1 : 0;
        if (shown) ages.push_back(age);
      }
    }
    std::sort(ages.begin(), ages.end());
    double sum = 0;
    for (double age : ages) sum += age;
    result.age_mean_s = ages.empty() ? 0 : sum / static_cast<double>(ages.size());
    result.age_p99_s = ages.empty() ? 0 : ages[static_cast<size_t>(0.99 * (ages.size() - 1))];
    result.age_max_s = ages.empty() ? 0 : ages.back();
    result.live_shown_share = static_cast<double>(live_shown) / static_cast<double>(live_pairs);
    result.departed_shown_share = departed_pairs == 0 ? 0
                                                      : static_cast<double>(departed_shown) /
                                                            static_cast<double>(departed_pairs);
  };
  auto mark = [&](size_t node, double now) {
    if (has_change[node] != kNever) return;
    has_change[node] = now - warm_up;
    if (!departed[node]) ++reached;
  };
  while (!rounds.empty() && reached < live) {
    auto [now, caller] = rounds.top();
    rounds.pop();
    if (now >= horizon) break;
    if (!changed && now >= warm_up) {
      measure_ages(warm_up);
      changed = true;
      mark(0, warm_up);  // Node 0's holdings change.
    }
    if (now >= stopped[caller]) continue;
    float* own = &heartbeat[caller * n];
    if (own[caller] == kUnknown) ++known[caller];
    own[caller] = static_cast<float>(now);
    size_t peer = random() % (n - 1);
    if (peer >= caller) ++peer;
    double bytes = sizes.digest_entry * static_cast<double>(known[caller]) + sizes.heartbeat +
                   sizes.holding * options.holdings_per_node;
    if (now >= stopped[peer]) {
      rounds.push({now + exchange_wait + period, caller});
      continue;
    }
    float* theirs = &heartbeat[peer * n];
    if (theirs[peer] == kUnknown) ++known[peer];
    theirs[peer] = static_cast<float>(now);
    if (theirs[caller] == kUnknown) ++known[peer];
    theirs[caller] = static_cast<float>(now);
    if (changed && caller == 0) mark(peer, now);
    const float oldest = static_cast<float>(now - max_age);
    size_t sent = 0, learned = 0;
    for (size_t m = 0; m < n; ++m) {
      const bool take = theirs[m] > own[m] && theirs[m] >= oldest;
      learned += take && own[m] == kUnknown;
      sent += take;
      own[m] = take ? theirs[m] : own[m];
    }
    known[caller] += learned;
    bytes += sizes.heartbeat * static_cast<double>(sent);
    if (has_change[peer] != kNever && has_change[caller] == kNever && theirs[0] >= oldest) {
      mark(caller, now);
      bytes += sizes.holding * options.holdings_per_node;
    }
    if (now >= measured_from && now < warm_up) steady_bytes += bytes;
    rounds.push({now + call + period, caller});
  }
  std::vector<double> reach_times;
  for (size_t i = 0; i < n; ++i) {
    if (!departed[i] && has_change[i] != kNever) reach_times.push_back(has_change[i]);
  }
  std::sort(reach_times.begin(), reach_times.end());
  auto at_share = [&](double share) {
    const size_t index = static_cast<size_t>(share * static_cast<double>(live - 1));
    return index < reach_times.size() ? reach_times[index] : kNever;
  };
  result.half_s = at_share(0.5);
  result.most_s = at_share(0.99);
  result.all_s = reached == live ? reach_times.back() : kNever;
  result.bytes_per_node_per_s =
      2 * steady_bytes / static_cast<double>(n) / (warm_up - measured_from);
  return result;
}

// ---------------------------------------------------------------- report

json ToJson(const Propagation& propagation) {
  return {{"registration_returns_s", propagation.registration_returns_s},
          {"half_s", propagation.half_s},
          {"most_s", propagation.most_s},
          {"all_s", propagation.all_s},
          {"origin_sent_bytes", propagation.origin_sent_bytes}};
}

json SimulateCluster(int cluster_size, const EntrySizes& entry_sizes, double record_bytes,
                     const GossipSizes& gossip_sizes, const Options& options) {
  std::mt19937_64 random(options.seed + static_cast<uint64_t>(cluster_size));
  const int groups = GroupCount(cluster_size, options);
  const std::vector<SimMember> members = MakeMembers(cluster_size, options, random);
  const double member_list_bytes = MemberListBytesInFreshProcess(cluster_size, options);
  const double own_ring_bytes = static_cast<double>(
      PlacementRing::Build(GroupNodes(members, members.front().group))->memory_bytes());
  const double records_bytes = record_bytes * options.datasets;
  const double manifests_bytes =
      entry_sizes.memory_bytes * static_cast<double>(options.files_per_dataset) * options.datasets;

  // Departed nodes still listed: those of the last `membership_lag` of churn.
  const int dead_listed = static_cast<int>(
      cluster_size * options.churn_per_minute * options.membership_lag_s / 60.0 + 0.5);
  std::vector<bool> dead(cluster_size, false);
  for (int placed = 0; placed < dead_listed;) {
    const int node = 1 + static_cast<int>(random() % (cluster_size - 1));
    if (!dead[node]) {
      dead[node] = true;
      ++placed;
    }
  }
  const double new_manifest_bytes =
      entry_sizes.encoded_bytes * static_cast<double>(options.new_dataset_files);
  const Propagation removal =
      SimulatePropagation(cluster_size, dead, records_bytes, 0, options, random);
  const Propagation registration =
      SimulatePropagation(cluster_size, dead, records_bytes, new_manifest_bytes, options, random);
  const LocateResult locate = SimulateLocate(cluster_size, dead, options);
  const ChurnResult churn = SimulateChurn(members, groups, options, random);
  const LocalityResult locality =
      SimulateLocality(cluster_size, dead, gossip_sizes, options, random);

  json registration_out = ToJson(registration);
  registration_out["manifest_encoded_bytes"] = new_manifest_bytes;
  json out = {
      {"nodes", cluster_size},
      {"groups", groups},
      {"dead_listed", dead_listed},
      {"memory_per_node",
       {{"member_list_bytes", member_list_bytes},
        {"own_ring_bytes", own_ring_bytes},
        {"catalog_records_encoded_bytes", records_bytes},
        {"manifests_bytes", manifests_bytes}}},
      {"record_change", ToJson(removal)},
      {"registration", registration_out},
      {"churn",
       {{"leaves", churn.leaves},
        {"joins", churn.joins},
        {"moved_bytes_per_leave", churn.moved_bytes_per_leave},
        {"moved_bytes_per_join", churn.moved_bytes_per_join},
        {"moved_over_minimum_mean", churn.moved_over_minimum_mean},
        {"moved_over_minimum_worst", churn.moved_over_minimum_worst},
        {"moved_bytes_per_minute", churn.moved_bytes_per_minute}}},
      {"locate", {{"latency_s", locate.latency_s}, {"answered_share", locate.answered_share}}},
      {"published_locality",
       {{"change_half_s", locality.half_s},
        {"change_most_s", locality.most_s},
        {"change_all_s", locality.all_s},
        {"age_mean_s", locality.age_mean_s},
        {"age_p99_s", locality.age_p99_s},
        {"age_max_s", locality.age_max_s},
        {"live_shown_share", locality.live_shown_share},
        {"departed_shown_share", locality.departed_shown_share},
        {"bytes_per_node_per_s", locality.bytes_per_node_per_s}}},
  };
  return out;
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  granary::Options options;
  CLI::App app("cluster_sim: Granary's membership, placement, catalog and Locate at scale");
  app.add_option("--nodes", options.cluster_sizes, "cluster sizes to simulate")
      ->capture_default_str();
  app.add_option("--group-size", options.group_size, "members per group (0: one group)")
      ->capture_default_str();
  app.add_option("--max-weight", options.max_weight, "weights are 1..this")->capture_default_str();
  app.add_option("--datasets", options.datasets, "datasets in the catalog")->capture_default_str();
  app.add_option("--files-per-dataset", options.files_per_dataset, "files of each dataset")
      ->capture_default_str();
  app.add_option("--new-dataset-files", options.new_dataset_files,
                 "files of the dataset whose registration is followed")
      ->capture_default_str();
  app.add_option("--churn", options.churn_per_minute, "share of nodes leaving per minute")
      ->capture_default_str();
  app.add_option("--minutes", options.minutes, "minutes of churn")->capture_default_str();
  app.add_option("--rtt-ms", options.rtt_ms, "round trip between two nodes")->capture_default_str();
  app.add_option("--call-service-ms", options.call_service_ms, "server time of one small call")
      ->capture_default_str();
  app.add_option("--uplink-gbps", options.uplink_gbps, "each node's uplink")->capture_default_str();
  app.add_option("--node-cache-tib", options.node_cache_tib, "cached bytes per node")
      ->capture_default_str();
  app.add_option("--membership-lag-s", options.membership_lag_s,
                 "how long a departed node stays listed")
      ->capture_default_str();
  app.add_option("--holdings-per-node", options.holdings_per_node,
                 "datasets each node holds bytes of (its locality report's holdings)")
      ->capture_default_str();
  app.add_option("--seed", options.seed)->capture_default_str();
  bool measure_member_list = false;
  app.add_flag("--measure-member-list", measure_member_list,
               "print the resident bytes of the first --nodes size's member list and exit "
               "(how the simulation measures it, in a fresh process)");
  CLI11_PARSE(app, argc, argv);
  if (measure_member_list) {
    std::mt19937_64 random(options.seed + static_cast<uint64_t>(options.cluster_sizes.front()));
    std::cout << granary::MemberListResidentGrowth(
                     granary::MakeMembers(options.cluster_sizes.front(), options, random))
              << "\n";
    return 0;
  }
  for (int size : options.cluster_sizes) {
    if (size < 2) {
      std::cerr << "cluster_sim: --nodes " << size << ": a cluster has at least 2 nodes\n";
      return 1;
    }
  }

  const granary::EntrySizes entry_sizes = granary::MeasureEntrySizes();
  const double record_bytes = granary::CatalogRecordEncodedBytes();
  const granary::GossipSizes gossip_sizes = granary::MeasureGossipSizes();
  nlohmann::json results = nlohmann::json::array();
  for (int size : options.cluster_sizes) {
    results.push_back(
        granary::SimulateCluster(size, entry_sizes, record_bytes, gossip_sizes, options));
  }
  std::cout << nlohmann::json{{"manifest_entry_memory_bytes", entry_sizes.memory_bytes},
                              {"manifest_entry_encoded_bytes", entry_sizes.encoded_bytes},
                              {"catalog_record_encoded_bytes", record_bytes},
                              {"clusters", results}}
                   .dump(2)
            << "\n";
  return 0;
}
