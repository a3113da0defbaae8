// granary-fuse MOUNTPOINT [--server ADDR] [--token-file PATH] [--foreground]
//              [--dataset NAME] [--version-grace-seconds S] [--takeover]
//              [--orphan-timeout-seconds S] [-o OPTS]
//
// Mounts every dataset of a granaryd (or one) as a read-only directory tree:
// MOUNTPOINT/<dataset>/<path>. Manifests come from that server, the local
// one; each chunk is read from its owner in the local server's cache group,
// over TCP when that is another node, so in a cluster with a token the mount
// needs --token-file (or $GRANARY_TOKEN_FILE). Without --foreground the
// process detaches once the mount is ready; either way it exits non-zero with
// a one-line reason if it cannot mount. SIGTERM, SIGINT and SIGHUP unmount cleanly, and so does
// `fusermount3 -u MOUNTPOINT`.
//
// Non-root users need `user_allow_other` in /etc/fuse.conf for -o allow_other
// (containers reading a mount made by another user need it). Every entry
// shows its source's owner, group, mode and POSIX ACLs, and the kernel
// enforces them (default_permissions, always on, and the kernel's ACL checks):
// other users of an allow_other mount read only what the source lets them
// read.
//
// The mount outlives this process: a connection keeper forked at the first
// mount holds its FUSE connection (connection_keeper.h), and the next
// granary-fuse on the mount point takes it over, open files and all; one
// that is still running is replaced only with --takeover (an upgrade).
//
// A dataset refreshed on the server shows its new version within a second;
// files opened before keep reading the old one. The old version is released
// (its manifest freed, its inodes answering ESTALE) once no file of it is
// open and --version-grace-seconds have passed since it was refreshed away.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "client/cluster_reader.h"
#include "client/dataset_client.h"
#include "common/base/heap_buffers.h"
#include "common/base/logging.h"
#include "common/base/size.h"
#include "common/base/status.h"
#include "common/base/unique_fd.h"
#include "common/dataset/chunk_key.h"
#include "common/net/cluster_token.h"
#include "common/net/local_read_socket.h"
#include "common/net/server_address.h"
#include "fuse_client/jobs/job_reporter.h"
#include "fuse_client/jobs/reading_jobs.h"
#include "fuse_client/kernel/detach_mount.h"
#include "fuse_client/kernel/kernel_channel.h"
#include "fuse_client/kernel/mount_device.h"
#include "fuse_client/operations/dataset_refresher.h"
#include "fuse_client/operations/fuse_ops.h"
#include "fuse_client/operations/inode_table.h"
#include "fuse_client/operations/mounted_version_releaser.h"
#include "fuse_client/passthrough/passthrough_files.h"
#include "fuse_client/read_path/chunk_cache.h"
#include "fuse_client/read_path/chunk_fetcher.h"
#include "fuse_client/read_path/page_store.h"
#include "fuse_client/read_path/readahead.h"
#include "fuse_client/read_path/use_reporter.h"
#include "fuse_client/restarts/connection_keeper.h"
#include "fuse_client/restarts/keeper_link.h"
#include "fuse_client/restarts/service_notify.h"
#include "fuse_client/restarts/standard_streams.h"
#include "source/opened_sources.h"

namespace granary::fuse {
namespace {

// Fetched chunks waiting to be copied into the kernel's page cache; past this
// the stores have fallen behind the readers, and new ones are dropped.
constexpr size_t kPageStoreQueue = 16;

// How often reads served without granaryd are reported to it (and files it
// withdrew are learnt): a withdrawn file's disk blocks stay held this long.
constexpr std::chrono::milliseconds kUseReportInterval{1000};

// How often what jobs read is reported to granaryd, which publishes it.
constexpr std::chrono::milliseconds kJobReportInterval{1000};

// How often the dataset list is refreshed and versions past their grace
// period are looked for, whether or not anyone looks at the root.
constexpr std::chrono::milliseconds kReleasePeriod{2000};

// As many kept files as `wanted`, within the descriptors this process may
// open: it raises its limit (root: up to fs.nr_open) to fit them with a
// quarter more for everything else.
size_t KeptFilesWithin(size_t wanted) {
  const rlim_t needed = static_cast<rlim_t>(wanted) / 3 * 4 + 4096;
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed && geteuid() == 0) {
    rlim_t nr_open = 0;
    std::ifstream("/proc/sys/fs/nr_open") >> nr_open;
    limit.rlim_max = std::max(limit.rlim_max, std::min(needed, nr_open));
  }
  limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? needed : std::min(needed, limit.rlim_max);
  setrlimit(RLIMIT_NOFILE, &limit);
  getrlimit(RLIMIT_NOFILE, &limit);
  const size_t room = limit.rlim_cur >= needed ? wanted : limit.rlim_cur / 4 * 3;
  if (room < wanted) {
    GRANARY_LOG(INFO) << "keeping at most " << room << " files open for passthrough, not " << wanted
                      << " (RLIMIT_NOFILE " << limit.rlim_cur << ")";
  }
  return room;
}

struct Flags {
  std::string mountpoint;
  std::string server;
  std::string token_file;
  std::string dataset;
  std::vector<std::string> options;
  bool foreground = false;
  std::string cache_size = "512MiB";
  std::string manifest_memory = "1GiB";
  std::string readahead = "32MiB";
  uint32_t read_ahead_kb = 4096;
  uint32_t readahead_threads = 4;
  bool no_page_store = false;
  bool no_local_reads = false;
  bool no_passthrough = false;
  bool no_job_accounting = false;
  size_t max_kept_files = 131072;
  std::string cold_open_memory = "256MiB";
  uint32_t fuse_threads = 16;
  uint32_t rpc_timeout_ms = 10000;
  uint32_t retry_after_ms = 1000;
  uint32_t version_grace_seconds = 60;
  bool takeover = false;
  uint32_t orphan_timeout_seconds = 300;
  std::string log_file;
};

// Forks; the parent waits for the child to report the mount ready (exit 0)
// or to fail (its reason, exit 1). Returns the fd the child reports on. Must
// run before any thread exists (gRPC starts threads).
int Detach() {
  int report[2];
  if (pipe(report) != 0) {
    std::perror("granary-fuse: pipe");
    std::exit(1);
  }
  pid_t child = fork();
  if (child < 0) {
    std::perror("granary-fuse: fork");
    std::exit(1);
  }
  if (child > 0) {
    close(report[1]);
    char status = 1;
    bool reported = read(report[0], &status, 1) == 1;
    std::exit(reported && status == 0 ? 0 : 1);
  }
  close(report[0]);
  setsid();
  return report[1];
}

// Reports readiness to the waiting parent and leaves the terminal.
void ReportReady(int report_fd, const std::string& log_file) {
  RedirectStandardStreams(log_file.empty() ? "/dev/null" : log_file);
  char ok = 0;
  if (write(report_fd, &ok, 1) != 1) {
    GRANARY_LOG(WARNING) << "cannot report readiness";
  }
  close(report_fd);
}

// Raises the kernel readahead of the mount's backing device so sequential
// reads arrive as parallel max_read requests rather than 128 KiB ones. Needs
// root; otherwise the kernel default stays.
void RaiseReadahead(const std::string& mountpoint, uint32_t read_ahead_kb) {
  std::optional<std::string> device = MountDevice(mountpoint);  // The last mount on it is ours.
  if (!device) return;
  std::string path = absl::StrCat("/sys/class/bdi/", *device, "/read_ahead_kb");
  std::ofstream out(path);
  out << read_ahead_kb << "\n";
  out.flush();
  if (!out) {
    GRANARY_LOG(INFO) << "cannot raise " << path << " (not root?); kernel readahead stays default";
  }
}

// The absolute path of mount point `path`, resolved without looking at the
// mount point itself: a mount whose server is gone may answer nothing until
// the next server takes it over.
absl::StatusOr<std::string> MountPointPath(const std::string& path) {
  std::string directory = path;
  while (directory.size() > 1 && directory.back() == '/') directory.pop_back();
  const size_t slash = directory.rfind('/');
  std::string parent =
      slash == std::string::npos ? "." : directory.substr(0, std::max<size_t>(slash, 1));
  std::string name = slash == std::string::npos ? directory : directory.substr(slash + 1);
  char resolved[PATH_MAX];
  if (realpath(parent.c_str(), resolved) == nullptr) {
    return absl::NotFoundError(absl::StrCat("mount point ", path, ": ", std::strerror(errno)));
  }
  if (name.empty() || name == "." || name == "..") {
    if (realpath(path.c_str(), resolved) == nullptr) {
      return absl::NotFoundError(absl::StrCat("mount point ", path, ": ", std::strerror(errno)));
    }
    return std::string(resolved);
  }
  return absl::StrCat(std::string_view(resolved) == "/" ? "" : resolved, "/", name);
}

// A mount point whose FUSE process died with no keeper to hold its
// connection answers ENOTCONN until it is unmounted. Detaching it lets this
// granary-fuse mount in the same place; files opened through the dead mount
// stay unusable. If detaching fails, the mount itself reports why.
void DetachDeadMount(const std::string& mountpoint) {
  // statfs() always reaches the FUSE process; stat() may be answered from
  // the kernel's attribute cache even on a dead mount.
  struct statfs mounted;
  if (statfs(mountpoint.c_str(), &mounted) == 0 || errno != ENOTCONN) return;
  GRANARY_LOG(WARNING) << "mount point " << mountpoint
                       << " is a dead FUSE mount (its process died); detaching it";
  DetachMount(mountpoint);
}

// Numbers every version of `state` the table lacks as before; each loads
// when first used (a version the server no longer has answers ESTALE).
void AdoptSlots(const v1::Handover& state, InodeTable& table) {
  for (const v1::MountSlot& slot : state.slots()) {
    if (!table.HasSlot(slot.slot())) table.Adopt(slot.slot(), slot.dataset(), slot.version());
  }
  table.SkipSlotsBelow(state.next_slot());
}

int Run(const Flags& flags, int report_fd) {
  auto fail = [](const std::string& reason) {
    std::fprintf(stderr, "granary-fuse: %s\n", reason.c_str());
    return 1;
  };
  absl::StatusOr<std::string> resolved = MountPointPath(flags.mountpoint);
  if (!resolved.ok()) return fail(std::string(resolved.status().message()));
  const std::string mountpoint = *resolved;
  absl::StatusOr<uint64_t> cache_size = ParseSize(flags.cache_size);
  if (!cache_size.ok()) return fail(std::string(cache_size.status().message()));
  absl::StatusOr<uint64_t> readahead_bytes = ParseSize(flags.readahead);
  if (!readahead_bytes.ok()) return fail(std::string(readahead_bytes.status().message()));
  absl::StatusOr<uint64_t> manifest_memory = ParseSize(flags.manifest_memory);
  if (!manifest_memory.ok()) return fail(std::string(manifest_memory.status().message()));
  if (*manifest_memory == 0) return fail("--manifest-memory must be more than 0");
  absl::StatusOr<uint64_t> cold_open_memory = ParseSize(flags.cold_open_memory);
  if (!cold_open_memory.ok()) {
    return fail("--cold-open-memory: " + std::string(cold_open_memory.status().message()));
  }

  // A keeper holding the mount's connection means a granary-fuse served it:
  // this one takes it over. Otherwise this one mounts, and starts a keeper
  // first, while no thread exists (it forks).
  std::unique_ptr<KeeperLink> keeper;
  std::optional<v1::Handover> preview;
  if (absl::StatusOr<std::unique_ptr<KeeperLink>> found = KeeperLink::Connect(mountpoint);
      found.ok()) {
    keeper = *std::move(found);
    absl::StatusOr<v1::Handover> state = keeper->Preview(flags.takeover);
    if (!state.ok()) return fail(std::string(state.status().message()));
    preview = *std::move(state);
  } else if (!absl::IsNotFound(found.status())) {
    return fail(std::string(found.status().message()));
  } else {
    DetachDeadMount(mountpoint);
    absl::StatusOr<UniqueFd> link = StartConnectionKeeper(
        {.mountpoint = mountpoint,
         .orphan_timeout = std::chrono::seconds(flags.orphan_timeout_seconds),
         .log_file =
             report_fd >= 0 ? (flags.log_file.empty() ? "/dev/null" : flags.log_file) : ""});
    if (!link.ok()) return fail(std::string(link.status().message()));
    keeper = std::make_unique<KeeperLink>(*std::move(link), mountpoint);
  }

  KeepLargeBuffersInTheHeap();

  DatasetClient::Options client_options;
  client_options.read_timeout = std::chrono::milliseconds(flags.rpc_timeout_ms);
  absl::StatusOr<std::string> token = ResolveClusterToken(flags.token_file);
  if (!token.ok()) return fail(std::string(token.status().message()));
  client_options.cluster_token = *std::move(token);
  absl::StatusOr<std::unique_ptr<DatasetClient>> client =
      DatasetClient::Connect(ResolveServerAddress(flags.server), client_options);
  if (!client.ok()) return fail(std::string(client.status().message()));

  // Set once the cluster's members are known; until then manifests come from
  // the local server alone.
  std::atomic<ClusterReader*> peers{nullptr};
  InodeTable table({.uid = getuid(),
                    .gid = getgid(),
                    .release_after = std::chrono::seconds(flags.version_grace_seconds),
                    .memory_budget = *manifest_memory,
                    .load = [&client, &peers](std::string_view name, uint64_t version) {
                      absl::StatusOr<DatasetSnapshot> local = (*client)->GetManifest(name, version);
                      ClusterReader* others = peers.load();
                      // The local server is down or stopping: another member
                      // holds the same catalog.
                      if (others == nullptr || !ServerDownOrStopping(local.status())) {
                        return local;
                      }
                      absl::StatusOr<DatasetSnapshot> theirs =
                          others->ManifestFromPeers(name, version);
                      if (theirs.ok()) return theirs;
                      return absl::StatusOr<DatasetSnapshot>(absl::Status(
                          local.status().code(),
                          absl::StrCat(local.status().message(), "; ", theirs.status().message())));
                    }});
  DatasetRefresher refresher(client->get(), &table, flags.dataset, std::chrono::seconds(1));
  table.set_journal(keeper.get());
  auto load_datasets = [&]() -> absl::Status {
    if (absl::Status status = refresher.Refresh(); !status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("cannot load datasets from ", (*client)->address(), ": ",
                                       status.ToString()));
    }
    return absl::OkStatus();
  };
  // A new server numbers no version until it holds the mount: the one it
  // replaces may still number some.
  if (preview) {
    AdoptSlots(*preview, table);
  } else if (absl::Status loaded = load_datasets(); !loaded.ok()) {
    return fail(std::string(loaded.message()));
  }
  ClusterReader servers(client->get(), {.client = client_options, .watch = {}});
  peers.store(&servers);
  ChunkCache cache(*cache_size);
  // Chunks the local server holds are read out of its data files, and files
  // it holds whole are passed through, when it is reached over its Unix
  // socket (so it runs on this host).
  std::unique_ptr<LocalChunkReader> local_reads;
  if (absl::StartsWith((*client)->address(), "unix:") && !flags.no_local_reads) {
    local_reads = std::make_unique<LocalChunkReader>(
        LocalReadSocketPath(std::string_view((*client)->address()).substr(5)));
  }
  // Declared before what uses them: the reporter's last report, as it
  // stops, may withdraw kept files; the readahead threads, as they stop, may
  // still record reads.
  KernelChannel channel(/*want_passthrough=*/local_reads != nullptr && !flags.no_passthrough,
                        keeper.get());
  std::unique_ptr<PassthroughFiles> passthrough;
  std::unique_ptr<UseReporter> uses;
  if (local_reads != nullptr) {
    passthrough = std::make_unique<PassthroughFiles>(
        &channel, local_reads.get(), KeptFilesWithin(flags.max_kept_files), *cold_open_memory);
    uses = std::make_unique<UseReporter>(
        local_reads.get(), kUseReportInterval,
        [&passthrough](const v1::WithdrawnFiles& withdrawn) { passthrough->Withdraw(withdrawn); },
        [&table] { return table.KeptVersions(); });
    passthrough->set_use_reporter(uses.get());
    passthrough->set_keeper(keeper.get());
  }
  // The sources of the datasets granaryd listed, read when no server
  // answers (fuse_client/read_path/source_file.h says which keys sign S3 reads).
  OpenedSources direct_sources({});
  ChunkFetcher fetcher(&servers, local_reads.get(), uses.get(), &direct_sources,
                       std::chrono::milliseconds(flags.retry_after_ms));
  PageStore page_store(kPageStoreQueue);
  Readahead readahead(static_cast<int>(flags.readahead_threads), &cache, &fetcher, &page_store);

  // From here until the session loop runs, a mount taken over waits.
  std::optional<KeeperLink::Handover> handover;
  if (preview) {
    absl::StatusOr<KeeperLink::Handover> taken = keeper->TakeOver(flags.takeover);
    if (!taken.ok()) return fail(std::string(taken.status().message()));
    handover = *std::move(taken);
    if (passthrough != nullptr) passthrough->Inherit(handover->state);
    AdoptSlots(handover->state, table);
    if (absl::Status loaded = load_datasets(); !loaded.ok())
      return fail(std::string(loaded.message()));
  }
  MountedVersionReleaser releaser(&table, &refresher, kReleasePeriod);
  const uint16_t generation = handover ? static_cast<uint16_t>(handover->state.generation()) : 1;
  // Jobs' reads are counted where a local granaryd takes the reports.
  ReadingJobs jobs;
  std::unique_ptr<JobReporter> job_reporter;
  if (local_reads != nullptr && !flags.no_job_accounting) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> granaryd = MakeChannel((*client)->address());
    if (!granaryd.ok()) return fail(std::string(granaryd.status().message()));
    job_reporter =
        std::make_unique<JobReporter>(&jobs.ledger(), *std::move(granaryd), kJobReportInterval);
  }
  GranaryFs fs(&table, &refresher, {&cache, &fetcher, &readahead, &page_store, *readahead_bytes},
               &channel, passthrough.get(), generation, job_reporter != nullptr ? &jobs : nullptr);

  // default_permissions always: the kernel checks each access against the
  // source's owners and modes that the entries show (fuse_ops.h); no option
  // given here can turn that off.
  std::string options =
      absl::StrCat("ro,default_permissions,fsname=granary,subtype=granary,max_read=", kMaxRead);
  for (const std::string& option : flags.options) absl::StrAppend(&options, ",", option);
  std::vector<std::string> arg_strings = {"granary-fuse", "-o", options};
  std::vector<char*> argv;
  for (std::string& arg : arg_strings) argv.push_back(arg.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  fuse_session* session =
      fuse_session_new(&args, &GranaryFs::Operations(), sizeof(fuse_lowlevel_ops), &fs);
  if (session == nullptr) return fail(absl::StrCat("bad mount options '", options, "'"));
  if (fuse_set_signal_handlers(session) != 0) {
    fuse_session_destroy(session);
    return fail("cannot install signal handlers");
  }
  // libfuse serves a connection it is handed as /dev/fd/N, mounted already.
  const std::string mount_target =
      handover ? absl::StrCat("/dev/fd/", handover->fuse_fd.Release()) : mountpoint;
  if (fuse_session_mount(session, mount_target.c_str()) != 0) {
    fuse_remove_signal_handlers(session);
    fuse_session_destroy(session);
    return fail(absl::StrCat("cannot mount on ", mountpoint));
  }
  if (absl::Status attached = fs.AttachChannel(session); !attached.ok()) {
    fuse_session_unmount(session);
    fuse_remove_signal_handlers(session);
    fuse_session_destroy(session);
    return fail(std::string(attached.message()));
  }
  if (handover) {
    channel.ReplayInit(handover->state.init_request());
    if (absl::Status resent = channel.ResendUnanswered(); !resent.ok()) {
      GRANARY_LOG(WARNING) << resent;
    }
    GRANARY_LOG(INFO) << "took " << mountpoint << " over (generation " << generation << ")";
  } else if (absl::Status attached = keeper->Attach(fuse_session_fd(session)); !attached.ok()) {
    GRANARY_LOG(ERROR) << "cannot hand the connection to its keeper (" << attached
                       << "): the mount will not outlive this process";
  }
  keeper->OfferOpenJournal();
  // Another granary-fuse taking the mount over: leave at once, mounted. The
  // requests this process holds are sent to the next one again, and the
  // keeper forgets this process's backing files.
  keeper->WatchForStop([&mountpoint] {
    GRANARY_LOG(INFO) << "handing " << mountpoint << " over to the next granary-fuse";
    std::fflush(nullptr);
    _exit(0);
  });
  if (geteuid() == 0) RaiseReadahead(mountpoint, flags.read_ahead_kb);
  if (!flags.no_page_store) page_store.Attach(session);
  GRANARY_LOG(INFO) << "mounted " << table.ListDatasets().size() << " dataset(s) from "
                    << (*client)->address() << " on " << mountpoint
                    << "; chunks are read from their owners in " << servers.view().ToString();
  if (uses != nullptr) uses->Start();
  if (report_fd >= 0) ReportReady(report_fd, flags.log_file);
  NotifyServiceManagerReady();

  fuse_loop_config* loop = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(loop, flags.fuse_threads);
  int result = fuse_session_loop_mt(session, loop);
  fuse_loop_cfg_destroy(loop);
  keeper->Unmounting();
  page_store.Detach();
  GRANARY_LOG(INFO) << "chunks copied into the kernel's page cache: " << page_store.stored() << " ("
                    << page_store.dropped() << " not copied)";
  if (passthrough != nullptr) {
    GRANARY_LOG(INFO) << "opens passed through to the kernel: " << passthrough->passed_through()
                      << " (" << passthrough->from_kept() << " from kept files)";
  }
  // The kernel's backing ids are forgotten while the connection is open.
  if (passthrough != nullptr) passthrough->Close();
  fuse_session_unmount(session);
  // A connection taken over was mounted by another process: libfuse knows
  // no mount point to unmount.
  if (handover) DetachMount(mountpoint);
  fuse_remove_signal_handlers(session);
  fuse_session_destroy(session);
  GRANARY_LOG(INFO) << "unmounted " << mountpoint;
  return result == 0 ? 0 : 1;
}

}  // namespace
}  // namespace granary::fuse

int main(int argc, char** argv) {
  // Debian's Abseil is built with mutex deadlock detection on, which costs
  // every lock and unlock a graph update; gRPC locks a lot.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  granary::fuse::Flags flags;
  CLI::App app("granary-fuse: every Granary dataset as a read-only directory", "granary-fuse");
  app.add_option("mountpoint", flags.mountpoint, "Directory to mount on")->required();
  app.add_option("--server", flags.server,
                 "The local granaryd: unix:PATH or HOST:PORT (default: $GRANARY_SERVER, else "
                 "the default socket)");
  app.add_option("--token-file", flags.token_file,
                 "File holding the cluster token that TCP servers require (default: "
                 "$GRANARY_TOKEN_FILE, else none)");
  app.add_flag("-f,--foreground", flags.foreground, "Stay in the foreground");
  app.add_option("--dataset", flags.dataset, "Mount only this dataset");
  app.add_option("-o", flags.options, "Mount options, comma-separated (e.g. allow_other)")
      ->delimiter(',');
  app.add_option("--cache-size", flags.cache_size, "In-process chunk cache size")
      ->capture_default_str();
  app.add_option("--manifest-memory", flags.manifest_memory,
                 "Memory for the manifests of datasets not being read: beyond it, those used "
                 "least recently are dropped, and loaded again when next used")
      ->capture_default_str();
  app.add_option("--readahead", flags.readahead, "Readahead for sequential readers")
      ->capture_default_str();
  app.add_option("--readahead-threads", flags.readahead_threads, "Parallel readahead fetches")
      ->capture_default_str();
  app.add_flag("--no-page-store", flags.no_page_store,
               "Do not copy fetched chunks into the kernel's page cache (reads of their other "
               "bytes then each cost a FUSE request)");
  app.add_flag("--no-local-reads", flags.no_local_reads,
               "Receive every chunk over gRPC, rather than reading those the local server holds "
               "out of its data files (this also turns passthrough off)");
  app.add_flag("--no-passthrough", flags.no_passthrough,
               "Serve every read through granary-fuse, never letting the kernel read files the "
               "local server holds whole (FUSE passthrough)");
  app.add_flag("--no-job-accounting", flags.no_job_accounting,
               "Do not count what each job reads (granary jobs, the per-job series of "
               "granaryd's /metrics)");
  app.add_option("--max-kept-files", flags.max_kept_files,
                 "Files held whole whose descriptors stay open after they are closed, or that "
                 "the server handed out ahead of their first open, so that the next open "
                 "passes them through without asking the server")
      ->capture_default_str();
  app.add_option("--cold-open-memory", flags.cold_open_memory,
                 "Memory for copies of small files that the local server reads through at "
                 "their first open and hands over before storing them; beyond it (or with 0), "
                 "an open waits until the server has stored the file")
      ->capture_default_str();
  app.add_option("--read-ahead-kb", flags.read_ahead_kb,
                 "Kernel readahead of the mount (root only)")
      ->capture_default_str();
  app.add_option("--fuse-threads", flags.fuse_threads, "Maximum FUSE worker threads")
      ->capture_default_str();
  app.add_option("--rpc-timeout-ms", flags.rpc_timeout_ms, "Deadline of one chunk read")
      ->capture_default_str();
  app.add_option("--retry-server-ms", flags.retry_after_ms,
                 "After the cache servers fail, read sources directly this long before trying "
                 "them again")
      ->capture_default_str();
  app.add_option("--version-grace-seconds", flags.version_grace_seconds,
                 "Keep a dataset version refreshed away or removed at least this long, and "
                 "until no file of it is open")
      ->capture_default_str();
  app.add_flag("--takeover", flags.takeover,
               "Take the mount over from the granary-fuse serving it (an upgrade): it leaves, "
               "this process serves on, and open files keep working; without this flag, only "
               "a mount whose granary-fuse died is taken over");
  app.add_option("--orphan-timeout-seconds", flags.orphan_timeout_seconds,
                 "After granary-fuse dies, keep its mount waiting for the next one this long "
                 "(readers wait meanwhile), then unmount it")
      ->capture_default_str();
  app.add_option("--log-file", flags.log_file, "Where a detached process logs");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  int report_fd = flags.foreground ? -1 : granary::fuse::Detach();
  return granary::fuse::Run(flags, report_fd);
}
