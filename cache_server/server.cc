#include "cache_server/server.h"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cache_server/access/access_policy.h"
#include "cache_server/access/connection_acceptor.h"
#include "cache_server/access/connection_table.h"
#include "cache_server/access/request_authenticator.h"
#include "cache_server/access/source_roots.h"
#include "cache_server/catalog/catalog.h"
#include "cache_server/catalog/catalog_sync.h"
#include "cache_server/catalog/dataset_registry.h"
#include "cache_server/catalog/source_change_refresher.h"
#include "cache_server/catalog/version_activity.h"
#include "cache_server/catalog/version_releaser.h"
#include "cache_server/cluster/cluster_view.h"
#include "cache_server/config/members_file.h"
#include "cache_server/data_dir_lock.h"
#include "cache_server/holds/cluster_holds.h"
#include "cache_server/holds/hold_table.h"
#include "cache_server/listening_socket.h"
#include "cache_server/membership/etcd_membership.h"
#include "cache_server/membership/static_membership.h"
#include "cache_server/metrics.h"
#include "cache_server/prewarm/fill_scheduler.h"
#include "cache_server/prewarm/prewarm_coordinator.h"
#include "cache_server/read_path/batch_reads.h"
#include "cache_server/read_path/local_read_server.h"
#include "cache_server/read_path/peer_read_server.h"
#include "cache_server/read_path/read_through.h"
#include "cache_server/read_path/source_journal.h"
#include "cache_server/read_path/stream_watchdog.h"
#include "cache_server/read_path/write_behind.h"
#include "cache_server/service.h"
#include "cache_server/staging/slurm_queue.h"
#include "cache_server/staging/stage_ins.h"
#include "cache_server/staging/staging_service.h"
#include "cache_server/status/cluster_status.h"
#include "cache_server/status/job_metrics.h"
#include "cache_server/status/job_receipts.h"
#include "cache_server/status/jobs_service.h"
#include "cache_server/status/locality_board.h"
#include "cache_server/status/status_page.h"
#include "cache_server/store/chunk_store.h"
#include "common/base/absl_compat.h"
#include "common/base/file_util.h"
#include "common/base/logging.h"
#include "common/base/size.h"
#include "common/base/status.h"
#include "common/net/cluster_token.h"
#include "common/net/defaults.h"
#include "common/net/http.h"
#include "common/net/local_read_socket.h"
#include "common/net/server_address.h"
#include "grpc/grpc.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

namespace granary {
namespace {

constexpr int kScanThreads = 16;
// Requests in flight to one S3 endpoint: enough for prewarm to saturate
// it, few enough not to be throttled (503 SlowDown).
constexpr int kS3RequestsPerEndpoint = 32;
// How long a shutdown lets calls in flight finish. gRPC also waits this long
// for clients that keep idle connections open, so it stays short.
constexpr std::chrono::seconds kShutdownGrace{2};
// How often a server compares its catalog with a random peer's, to repair
// what a failed push missed.
constexpr std::chrono::seconds kCatalogExchangePeriod{30};
// How often older versions past their grace period are looked for.
constexpr std::chrono::seconds kReleasePeriod{1};
// A peer that does not answer a copy or an owner fetch in this time is passed
// over for the source. Half a reader's default deadline (granary-fuse's
// --rpc-timeout-ms), so that a silent peer costs the reader one wait, not its
// whole read.
constexpr std::chrono::seconds kPeerCopyTimeout{5};
// A connection with no call in flight for this long is closed by gRPC.
constexpr int kMaxConnectionIdleMs = 5 * 60 * 1000;
// Threads that store fetched chunks behind their readers' answers.
constexpr int kWriteBehindThreads = 2;
// Threads the synchronous server keeps waiting for calls (see SetSyncServerOption).
constexpr int kIdleServerThreads = 16;

// The default capacity: 80% of the free space on the cache directories'
// filesystems (each filesystem counted once), so the cache never fills a disk.
absl::StatusOr<uint64_t> DefaultCapacity(const std::vector<std::string>& dirs) {
  std::set<unsigned long> seen;
  uint64_t free_bytes = 0;
  for (const std::string& dir : dirs) {
    struct statvfs fs;
    if (::statvfs(dir.c_str(), &fs) != 0) {
      return ErrnoStatus(errno, absl::StrCat("cache directory ", dir));
    }
    if (seen.insert(fs.f_fsid).second) free_bytes += uint64_t{fs.f_bavail} * fs.f_frsize;
  }
  return free_bytes / 10 * 8;
}

// Creates the socket's directory and clears a stale socket file left by a
// crash; FAILED_PRECONDITION if a live server answers on it.
absl::Status PrepareSocket(const std::string& path) {
  std::error_code error;
  const std::filesystem::path directory = std::filesystem::path(path).parent_path();
  const bool created = std::filesystem::create_directories(directory, error);
  if (error) {
    return ErrnoStatus(error.value(), absl::StrCat("cannot create the directory of socket ", path));
  }
  // granaryd's umask keeps what it creates private, but the socket's users
  // must reach it: the socket's own mode and group decide who connects.
  if (created && ::chmod(directory.c_str(), 0755) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot open the directory of socket ", path));
  }
  GRANARY_ASSIGN_OR_RETURN(sockaddr_un address, UnixSocketAddress(path));
  if (!std::filesystem::exists(path, error)) return absl::OkStatus();
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool live = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  if (fd >= 0) ::close(fd);
  if (live) {
    return absl::FailedPreconditionError(
        absl::StrCat("another server is listening on socket ", path, "; choose another --socket"));
  }
  std::filesystem::remove(path, error);
  return absl::OkStatus();
}

// The group id of `name`, the value of config key `key`.
absl::StatusOr<gid_t> GroupId(const std::string& name, std::string_view key) {
  group entry{};
  group* found = nullptr;
  std::vector<char> buffer(16384);
  int error = ::getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found);
  if (found == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(AsAbsl(key), " '", name, "' is not a group on this host",
                     error == 0 ? "" : absl::StrCat(" (", std::strerror(error), ")")));
  }
  return found->gr_gid;
}

// The members file's or etcd's membership feeding `update`; none (a cluster of
// this node alone) when the config names neither.
absl::StatusOr<std::unique_ptr<MembershipSource>> StartMembership(const GranarydConfig& config,
                                                                  const Member& self,
                                                                  MembershipListener update) {
  if (!config.members_file.empty()) {
    GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<StaticMembership> members,
                             StaticMembership::Start(config.members_file, std::move(update)));
    return std::unique_ptr<MembershipSource>(std::move(members));
  }
  if (!config.etcd_url.empty()) {
    EtcdMembership::Options options;
    options.endpoint = config.etcd_url;
    options.self = self;
    options.lease_ttl = std::chrono::seconds(config.etcd_lease_ttl_seconds);
    GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<EtcdMembership> members,
                             EtcdMembership::Start(std::move(options), std::move(update)));
    return std::unique_ptr<MembershipSource>(std::move(members));
  }
  return std::unique_ptr<MembershipSource>();
}

// The address peers reach this node at: `advertise`, else `listen` with a
// wildcard host replaced by the host name; the Unix socket when there is no
// TCP listener (a node alone, which no peer reaches).
std::string AdvertisedAddress(const GranarydConfig& config) {
  if (!config.advertise.empty()) return config.advertise;
  if (config.listen.empty()) return "unix:" + config.socket_path;
  size_t colon = config.listen.rfind(':');
  std::string host = config.listen.substr(0, colon);
  if (host == "0.0.0.0" || host == "[::]" || host == "::" || host.empty()) {
    char name[256] = {};
    ::gethostname(name, sizeof(name) - 1);
    host = name;
  }
  return host + config.listen.substr(colon);
}

// This node as a member: as the members file lists it (the file is the
// cluster's truth for its address and group), else from the config.
absl::StatusOr<Member> SelfMember(const GranarydConfig& config) {
  if (config.members_file.empty()) {
    return Member{config.node_id, AdvertisedAddress(config), config.group, 1, true};
  }
  GRANARY_ASSIGN_OR_RETURN(std::vector<Member> members, ReadMembersFile(config.members_file));
  for (const Member& member : members) {
    if (member.id == config.node_id) return member;
  }
  return absl::InvalidArgumentError(absl::StrCat("node '", config.node_id,
                                                 "' is not listed in members file ",
                                                 config.members_file, "; set --node-id"));
}

// Limits on what one connection and the server as a whole may hold.
void ConfigureGrpcServer(const GranarydConfig& config, grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder->SetMaxSendMessageSize(kMaxMessageBytes);
  // As on the client (MakeChannel): with gRPC's BDP probe off on the server
  // too, peer chunk reads over TCP ran at 0.53 x iperf3 against 0.37 with it
  // (three alternating runs; bench/RESULTS.md, remote chunk reads).
  builder->AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  // A connection with no call for this long is closed, so idle connections
  // do not hold descriptors for good.
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, kMaxConnectionIdleMs);
  // Dead peers are found by keepalive pings; clients may ping every 10 s.
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60 * 1000);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20 * 1000);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10 * 1000);
  builder->AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                              static_cast<int>(config.max_streams_per_connection));
  // Each call in the synchronous server holds a thread; beyond this many,
  // calls get RESOURCE_EXHAUSTED instead of new threads.
  grpc::ResourceQuota quota("granaryd");
  quota.SetMaxThreads(static_cast<int>(config.max_threads));
  builder->SetResourceQuota(quota);
  // A thread stays when its call ends, up to this many idle: with gRPC's
  // default of two, a few concurrent readers had a thread created and torn
  // down around nearly every call.
  builder->SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 2);
  builder->SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
                               kIdleServerThreads);
}

}  // namespace

// Declared in the order they are built; destroyed in reverse.
struct GranaryServer::Parts {
  GranarydConfig config;
  std::unique_ptr<DataDirLock> lock;
  std::unique_ptr<SourceJournal> source_journal;  // Told of the store's changes.
  std::unique_ptr<store::ChunkStore> store;
  std::unique_ptr<Catalog> catalog;
  ServerMetrics metrics;
  std::unique_ptr<VersionActivity> activity;
  std::unique_ptr<SourceRoots> source_roots;
  std::unique_ptr<Sources> sources;
  std::unique_ptr<AccessPolicy> policy;
  std::unique_ptr<DatasetRegistry> registry;
  std::unique_ptr<ClusterView> cluster;
  std::unique_ptr<WriteBehind> write_behind;
  std::unique_ptr<ReadThrough> read_through;
  std::unique_ptr<BatchReads> batch_reads;
  std::unique_ptr<FillScheduler> fills;
  std::unique_ptr<CatalogSync> catalog_sync;
  std::unique_ptr<SourceChangeRefresher> source_refresher;
  std::unique_ptr<VersionReleaser> releaser;
  std::unique_ptr<ConnectionTable> connections;
  std::unique_ptr<RequestAuthenticator> authenticator;
  std::unique_ptr<PrewarmCoordinator> prewarms;
  std::unique_ptr<LocalityBoard> locality;
  std::unique_ptr<ClusterStatus> status;
  std::unique_ptr<JobLedger> jobs;
  std::unique_ptr<JobReceipts> receipts;
  std::unique_ptr<GranaryService> service;
  std::unique_ptr<HoldTable> holds;
  std::unique_ptr<ClusterHolds> cluster_holds;
  std::unique_ptr<SlurmQueue> slurm_queue;
  std::unique_ptr<StageInJournal> stage_in_journal;
  std::unique_ptr<StageIns> stage_ins;
  std::unique_ptr<StagingService> staging_service;
  std::unique_ptr<JobsService> jobs_service;
  std::unique_ptr<StatusPage> status_page;
  std::unique_ptr<StreamWatchdog> watchdog;
  std::unique_ptr<grpc::Server> grpc_server;
  std::unique_ptr<ConnectionAcceptor> acceptor;
  std::unique_ptr<LocalReadServer> local_reads;
  std::unique_ptr<PeerReadServer> peer_reads;  // With a TCP listener.
  HttpServer metrics_http;
  // Last, so it stops reporting changes before anything it reports to goes.
  std::unique_ptr<MembershipSource> membership;
  bool running = false;
};

GranaryServer::GranaryServer(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

GranaryServer::~GranaryServer() { Shutdown(); }

absl::StatusOr<std::unique_ptr<GranaryServer>> GranaryServer::Start(const GranarydConfig& config) {
  auto parts = std::make_unique<Parts>();
  parts->config = config;
  GranarydConfig& c = parts->config;
  if (c.cache_dirs.empty()) c.cache_dirs.push_back(c.data_dir + "/cache");
  if (c.node_id.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    c.node_id = host;
  }
  if (c.group.empty()) c.group = kDefaultGroup;
  // Before anything is opened, so that a bad receipt_dir stops granaryd at once.
  GRANARY_ASSIGN_OR_RETURN(
      parts->receipts,
      JobReceipts::Open({.node_id = c.node_id, .group = c.group, .directory = c.receipt_dir}));
  c.listen = TcpListenAddress(c);
  GRANARY_RETURN_IF_ERROR(CheckTcpPolicy(c));

  GRANARY_ASSIGN_OR_RETURN(parts->lock, DataDirLock::Acquire(c.data_dir));
  for (const std::string& dir : c.cache_dirs) {
    GRANARY_RETURN_IF_ERROR(CreatePrivateDirectory(dir, "cache directory"));
  }
  store::StoreOptions store_options;
  store_options.directories = c.cache_dirs;
  store_options.index_path = c.data_dir + "/index";
  if (c.capacity_bytes == 0) {
    GRANARY_ASSIGN_OR_RETURN(c.capacity_bytes, DefaultCapacity(c.cache_dirs));
  }
  store_options.capacity_bytes = c.capacity_bytes;
  if (!c.source_journal.empty()) {
    GRANARY_ASSIGN_OR_RETURN(parts->source_journal, SourceJournal::Open(c.source_journal));
    store_options.events = parts->source_journal.get();
  }
  GRANARY_ASSIGN_OR_RETURN(parts->store, store::ChunkStore::Open(store_options));
  GRANARY_ASSIGN_OR_RETURN(
      parts->catalog,
      Catalog::Open(c.data_dir + "/catalog",
                    {.manifest_memory_bytes = uint64_t{c.manifest_memory_mib} << 20}));
  parts->activity = std::make_unique<VersionActivity>(parts->store.get(),
                                                      std::chrono::seconds(c.active_after_seconds));
  GRANARY_ASSIGN_OR_RETURN(SourceRoots roots, SourceRoots::Resolve(c.source_roots));
  parts->source_roots = std::make_unique<SourceRoots>(std::move(roots));
  GRANARY_ASSIGN_OR_RETURN(
      parts->sources,
      Sources::Create(
          parts->source_roots.get(), c.s3_endpoints,
          Sources::Options{
              .scan_threads = kScanThreads,
              .s3_requests_per_endpoint = kS3RequestsPerEndpoint,
              .s3_endpoint_profiles = c.s3_endpoint_profiles,
              .s3 = {.connect_timeout = std::chrono::milliseconds(c.s3_connect_timeout_ms),
                     .request_timeout = std::chrono::milliseconds(c.s3_request_timeout_ms)}}));
  std::optional<gid_t> admin_gid;
  if (!c.admin_group.empty()) {
    GRANARY_ASSIGN_OR_RETURN(admin_gid, GroupId(c.admin_group, "admin_group"));
  }
  parts->policy = std::make_unique<AccessPolicy>(admin_gid, c.admin_group);
  parts->registry = std::make_unique<DatasetRegistry>(
      parts->catalog.get(), parts->store.get(), parts->activity.get(), parts->sources.get(),
      DatasetRegistry::Limits{c.max_datasets, c.max_dataset_entries});
  std::string token;
  if (!c.cluster_token_file.empty()) {
    GRANARY_ASSIGN_OR_RETURN(token, LoadClusterToken(c.cluster_token_file));
  }
  GRANARY_ASSIGN_OR_RETURN(Member self, SelfMember(c));
  MemberClients::Options peer_options;
  peer_options.local_node_id = c.node_id;
  peer_options.local_address = "unix:" + c.socket_path;
  peer_options.client.cluster_token = token;
  peer_options.client.read_timeout = kPeerCopyTimeout;
  parts->cluster = std::make_unique<ClusterView>(self, std::move(peer_options));
  parts->write_behind = std::make_unique<WriteBehind>(parts->store.get(), &parts->metrics,
                                                      c.write_behind_bytes, kWriteBehindThreads);
  parts->read_through = std::make_unique<ReadThrough>(
      parts->catalog.get(), parts->store.get(), &parts->metrics, parts->activity.get(),
      parts->cluster.get(), parts->write_behind.get(), parts->sources.get());
  parts->read_through->set_source_journal(parts->source_journal.get());
  parts->batch_reads = std::make_unique<BatchReads>(parts->catalog.get(), parts->policy.get(),
                                                    parts->read_through.get());
  parts->fills = std::make_unique<FillScheduler>(
      parts->catalog.get(), parts->read_through.get(), parts->activity.get(), parts->store.get(),
      &parts->metrics, parts->cluster.get(),
      FillScheduler::Options{.parallelism = c.fill_parallelism,
                             .default_policy = c.fill_on_read ? v1::FILL_ON_READ : v1::FILL_NONE});
  FillScheduler* fills = parts->fills.get();
  parts->read_through->set_miss_listener(
      [fills](const std::shared_ptr<const Manifest>& manifest, const ChunkKey& key) {
        fills->OnMiss(manifest, key);
      });
  parts->catalog_sync = std::make_unique<CatalogSync>(parts->catalog.get(), parts->registry.get(),
                                                      parts->cluster.get(), kCatalogExchangePeriod);
  CatalogSync* catalog_sync = parts->catalog_sync.get();
  parts->source_refresher = std::make_unique<SourceChangeRefresher>(
      parts->registry.get(), parts->catalog.get(),
      std::chrono::seconds(c.source_refresh_interval_seconds),
      [catalog_sync] { catalog_sync->PushToAll(); });
  SourceChangeRefresher* source_refresher = parts->source_refresher.get();
  parts->read_through->set_metadata_change_listener(
      [source_refresher](const Manifest& version, std::string_view path) {
        source_refresher->Notice(version, path);
      });
  parts->releaser = std::make_unique<VersionReleaser>(parts->registry.get(), parts->activity.get(),
                                                      std::chrono::seconds(c.version_grace_seconds),
                                                      kReleasePeriod);
  parts->connections = std::make_unique<ConnectionTable>(
      ConnectionLimits{c.max_connections, c.max_connections_per_user, c.max_connections_per_host});
  parts->authenticator = std::make_unique<RequestAuthenticator>(token, parts->connections.get());
  parts->prewarms = std::make_unique<PrewarmCoordinator>(
      PrewarmCoordinator::Parts{parts->catalog.get(), parts->read_through.get(), parts->store.get(),
                                &parts->metrics.prewarm, parts->activity.get(),
                                parts->cluster.get(), parts->policy.get()},
      PrewarmCoordinator::Options{
          .limits = {.parallelism = c.prewarm_parallelism,
                     .max_prewarms = c.max_prewarms,
                     .max_prewarms_per_user = c.max_prewarms_per_user},
          .max_paths = c.max_prewarm_paths,
          .user_share_bytes =
              static_cast<uint64_t>(static_cast<double>(c.capacity_bytes) * c.prewarm_user_share),
          .user_share_text = absl::StrCat("prewarm_user_share: ", c.prewarm_user_share, " of ",
                                          FormatSize(c.capacity_bytes))});
  parts->locality = std::make_unique<LocalityBoard>(
      parts->registry.get(), parts->fills.get(), parts->cluster.get(),
      LocalityBoard::Options{.period = std::chrono::milliseconds(c.locality_period_ms),
                             .max_age = std::chrono::seconds(c.locality_max_age_seconds),
                             .max_holdings = c.max_datasets});
  parts->status = std::make_unique<ClusterStatus>(ClusterStatus::Parts{
      parts->catalog.get(), parts->registry.get(), parts->store.get(), &parts->metrics,
      parts->cluster.get(), parts->fills.get(), parts->locality.get()});
  parts->jobs = std::make_unique<JobLedger>(JobLedger::Limits{
      .max_entries = c.max_job_series, .idle_after = std::chrono::seconds(c.job_idle_seconds)});
  parts->service = std::make_unique<GranaryService>(ServiceParts{
      parts->catalog.get(), parts->registry.get(), parts->read_through.get(), &parts->metrics,
      parts->cluster.get(), parts->catalog_sync.get(), parts->authenticator.get(),
      parts->policy.get(), parts->prewarms.get(), parts->status.get(), parts->locality.get()});
  parts->holds = std::make_unique<HoldTable>(
      parts->registry.get(), parts->activity.get(), parts->cluster.get(),
      HoldTable::Options{.share_bytes = static_cast<uint64_t>(
                             static_cast<double>(c.capacity_bytes) * c.hold_share),
                         .share_text = absl::StrCat("hold_share ", c.hold_share, " of ",
                                                    FormatSize(c.capacity_bytes))});
  parts->cluster_holds = std::make_unique<ClusterHolds>(parts->holds.get(), parts->cluster.get());
  parts->slurm_queue = std::make_unique<SlurmQueue>(c.scontrol);
  GRANARY_ASSIGN_OR_RETURN(parts->stage_in_journal,
                           StageInJournal::Open(absl::StrCat(c.data_dir, "/staging")));
  parts->stage_ins = std::make_unique<StageIns>(
      parts->slurm_queue.get(), parts->cluster.get(), parts->registry.get(),
      parts->cluster_holds.get(), parts->stage_in_journal.get(),
      StageIns::Options{.poll_period = std::chrono::milliseconds(c.stage_in_poll_ms)});
  parts->staging_service = std::make_unique<StagingService>(
      parts->stage_ins.get(), parts->holds.get(), parts->cluster_holds.get(),
      parts->authenticator.get(), parts->policy.get());
  parts->jobs_service = std::make_unique<JobsService>(parts->jobs.get(), parts->receipts.get(),
                                                      parts->authenticator.get(),
                                                      parts->policy.get(), parts->cluster.get());

  GRANARY_RETURN_IF_ERROR(PrepareSocket(c.socket_path));
  gid_t socket_gid = ::getegid();
  if (!c.socket_group.empty()) {
    GRANARY_ASSIGN_OR_RETURN(socket_gid, GroupId(c.socket_group, "socket_group"));
  }
  // The local read socket and the metrics endpoint come up before the gRPC
  // socket accepts, so that a client that got an answer finds them too.
  GRANARY_ASSIGN_OR_RETURN(parts->local_reads,
                           LocalReadServer::Start(LocalReadSocketPath(c.socket_path), c.socket_mode,
                                                  socket_gid, parts->read_through.get(),
                                                  parts->batch_reads.get(), parts->jobs.get()));
  Parts* raw = parts.get();
  parts->metrics_http.Handle("GET", "/metrics", [raw](const HttpRequest&) {
    HttpResponse response;
    response.content_type = "text/plain; version=0.0.4; charset=utf-8";
    response.body = raw->metrics.Render(raw->store->Stats(), raw->catalog->Size(),
                                        raw->catalog->ManifestMemory(), raw->holds->Totals());
    RenderJobMetrics(raw->jobs->Totals(), &response.body);
    return response;
  });
  parts->status_page = std::make_unique<StatusPage>(
      StatusPage::Parts{parts->catalog.get(), parts->status.get(), parts->jobs.get(),
                        parts->holds.get(), &parts->metrics, parts->cluster.get()});
  parts->status_page->Register(parts->metrics_http);
  if (absl::Status started = parts->metrics_http.Start(c.metrics_listen); !started.ok()) {
    return absl::Status(started.code(), absl::StrCat("metrics endpoint: ", started.message()));
  }
  std::vector<ConnectionAcceptor::Listener> listeners;
  auto close_listeners = [&listeners] {
    for (const ConnectionAcceptor::Listener& listener : listeners) ::close(listener.fd);
  };
  GRANARY_ASSIGN_OR_RETURN(
      int unix_fd, ListenOnUnixSocket(c.socket_path, SOCK_STREAM, c.socket_mode, socket_gid));
  listeners.push_back({unix_fd, Caller::Channel::kUnixSocket});
  if (!c.listen.empty()) {
    absl::StatusOr<int> tcp_fd = ListenOnTcp(c.listen);
    if (!tcp_fd.ok()) {
      close_listeners();
      return tcp_fd.status();
    }
    listeners.push_back({*tcp_fd, Caller::Channel::kTcp});
    if (token.empty()) {
      GRANARY_LOG(WARNING) << "TCP listener " << c.listen
                           << " runs without a cluster token (insecure_tcp): anyone who reaches "
                              "it may call granaryd as a cluster member";
    }
  }
  grpc::ServerBuilder builder;
  ConfigureGrpcServer(c, &builder);
  parts->watchdog = std::make_unique<StreamWatchdog>(std::chrono::seconds(c.stream_stall_seconds));
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> watched;
  watched.push_back(parts->watchdog->InterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(watched));
  builder.RegisterService(parts->service.get());
  builder.RegisterService(parts->staging_service.get());
  builder.RegisterService(parts->jobs_service.get());
  parts->grpc_server = builder.BuildAndStart();
  if (parts->grpc_server == nullptr) {
    close_listeners();
    return absl::InternalError("cannot start the gRPC server");
  }
  parts->running = true;
  ConnectionAcceptor::PeerReadHandler peer_read_handler;
  if (!c.listen.empty()) {
    parts->peer_reads = std::make_unique<PeerReadServer>(
        token,
        PeerReadServer::Limits{c.max_unauthenticated_connections_per_host,
                               c.max_unauthenticated_connections},
        parts->read_through.get(), &parts->metrics);
    peer_read_handler = [peer_reads = parts->peer_reads.get()](int fd, const Caller& caller) {
      peer_reads->Serve(fd, caller.address);
    };
  }
  absl::StatusOr<std::unique_ptr<ConnectionAcceptor>> acceptor =
      ConnectionAcceptor::Start(std::move(listeners), parts->connections.get(),
                                parts->grpc_server.get(), std::move(peer_read_handler));
  if (!acceptor.ok()) {
    close_listeners();
    GranaryServer cleanup(std::move(parts));
    return acceptor.status();
  }
  parts->acceptor = *std::move(acceptor);
  // Membership starts once this node answers, so that peers told about it
  // can reach it; the catalog exchange then needs the member list.
  ClusterView* cluster = parts->cluster.get();
  auto update = [cluster](std::vector<Member> members) {
    absl::Status updated = cluster->Update(std::move(members));
    if (!updated.ok()) GRANARY_LOG(WARNING) << "ignoring a member list: " << updated;
  };
  absl::StatusOr<std::unique_ptr<MembershipSource>> membership = StartMembership(c, self, update);
  if (!membership.ok()) {
    GranaryServer cleanup(std::move(parts));
    return membership.status();
  }
  parts->membership = *std::move(membership);
  parts->catalog_sync->Start();
  parts->locality->Start();
  store::StoreStats stats = parts->store->Stats();
  GRANARY_LOG(INFO) << "granaryd node '" << c.node_id << "' (group '" << c.group
                    << "') serving unix:" << c.socket_path << " and "
                    << (c.listen.empty() ? std::string("no TCP listener") : c.listen)
                    << ", metrics on http://" << c.metrics_listen
                    << "/metrics and its status page at /; data in " << c.data_dir << ", cache in "
                    << absl::StrJoin(c.cache_dirs, ", ") << " (" << FormatSize(stats.capacity_bytes)
                    << ", io " << stats.io_engine << ")";
  return std::unique_ptr<GranaryServer>(new GranaryServer(std::move(parts)));
}

void GranaryServer::Shutdown() {
  if (parts_ == nullptr || !parts_->running) return;
  parts_->running = false;
  // Leave the cluster first (an etcd lease is revoked), so peers stop
  // routing here while the last calls drain.
  parts_->membership.reset();
  if (parts_->acceptor != nullptr) parts_->acceptor->Shutdown();
  if (parts_->peer_reads != nullptr) parts_->peer_reads->Shutdown();
  parts_->grpc_server->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  parts_->grpc_server->Wait();
  parts_->local_reads->Shutdown();
  parts_->metrics_http.Stop();
  std::error_code ignored;
  std::filesystem::remove(parts_->config.socket_path, ignored);
  std::filesystem::remove(LocalReadSocketPath(parts_->config.socket_path), ignored);
  parts_.reset();
}

}  // namespace granary
