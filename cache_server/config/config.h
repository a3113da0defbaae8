// GranarydConfig is everything that configures one granaryd: where its data
// and cache directories are, how much it may cache, where it listens, and who
// it is in the cluster. Values come from, in increasing precedence, the
// embedded defaults (common/net/defaults.h), a YAML config file, and flags.
//
// The YAML file is a mapping of these keys (all optional):
//   data_dir: /var/lib/granary        capacity: 200GiB
//   listen: 0.0.0.0:7070              socket: /run/granary/granaryd.sock
//   metrics_listen: 127.0.0.1:7071    cache_dirs: [/nvme0/granary, /nvme1/granary]
//   node_id: node7                    group: rack3
//   members: /etc/granary/members.yaml   etcd: http://10.0.0.1:2379
//   advertise: 10.0.0.7:7070          etcd_lease_ttl: 10
//   cluster_token_file: /etc/granary/token   insecure_tcp: false
//   socket_mode: 0660                 socket_group: granary
//   prewarm_parallelism: 8            fill_parallelism: 4
//   source_roots: [/mnt/nfs/datasets, /lustre/ml]   admin_group: granary-admin
//   s3_endpoints: [https://s3.us-east-1.amazonaws.com, http://10.0.0.5:9000]
//   s3_connect_timeout_ms: 5000       s3_request_timeout_ms: 60000
//   s3_endpoint_profiles: {http://10.0.0.5:9000: minio}
//   max_datasets: 1000                max_dataset_entries: 5000000
//   max_prewarm_paths: 10000
//   max_prewarms: 8                   max_prewarms_per_user: 2
//   prewarm_user_share: 0.25
//   max_connections: 4096             max_connections_per_user: 256
//   max_connections_per_host: 256     max_streams_per_connection: 100
//   max_unauthenticated_connections: 32
//   max_unauthenticated_connections_per_host: 8
//   max_threads: 512                  stream_stall_seconds: 60
//   fill: on-read                     write_behind: 256MiB
//   version_grace_seconds: 300        manifest_memory_mib: 1024
//   source_refresh_interval_seconds: 60
//   max_job_series: 256               job_idle_seconds: 600
//   receipt_dir: /var/lib/granary/receipts
//   source_journal: /var/log/granary/source.jsonl
// An unknown key, a value of the wrong kind, or a bad size or address is an
// INVALID_ARGUMENT error naming the file, the key and the value.
//
// Thread-safety: plain values and pure functions.
#ifndef GRANARY_CACHE_SERVER_CONFIG_CONFIG_H_
#define GRANARY_CACHE_SERVER_CONFIG_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace granary {

struct GranarydConfig {
  std::string data_dir;
  // Empty: <data_dir>/cache.
  std::vector<std::string> cache_dirs;
  // 0: 80% of the free space of the cache directories' filesystems at startup.
  uint64_t capacity_bytes = 0;
  // TCP HOST:PORT, for peers. Empty: kDefaultListenAddress when a cluster is
  // configured (members_file or etcd_url), else no TCP listener at all
  // (TcpListenAddress()).
  std::string listen;
  std::string socket_path;  // Unix socket, for local clients.
  // The Unix socket is not authenticated by the cluster token: who may use
  // it is decided by its permission bits and group (empty: granaryd's own
  // group). Connecting needs write permission.
  uint32_t socket_mode = 0660;
  std::string socket_group;
  std::string metrics_listen;  // HOST:PORT of the Prometheus endpoint.
  std::string node_id;         // Empty: the host name.
  std::string group;           // Empty: "default".
  std::string members_file;
  std::string etcd_url;
  // HOST:PORT peers reach this node at; empty: `listen`, with a wildcard
  // host replaced by the host name.
  std::string advertise;
  uint32_t etcd_lease_ttl_seconds = 10;
  // A file holding the cluster token (common/net/cluster_token.h); empty: TCP
  // calls are not authenticated.
  std::string cluster_token_file;
  // Lets a TCP listener run without a cluster token, every call unauthenticated
  // (CheckTcpPolicy()); granaryd warns on every start.
  bool insecure_tcp = false;
  uint32_t prewarm_parallelism = 8;
  // Reads at the source that a fill and the readers' own misses keep going
  // together. Fewer than a prewarm's: a fill runs beside the job that reads,
  // on the same CPUs, and its reads past what the source needs to be kept
  // busy take CPU from the readers.
  uint32_t fill_parallelism = 4;
  // For datasets registered without a fill policy of their own: whether a
  // cold read starts filling the rest of the version (`fill: on-read`) or
  // not (`fill: none`).
  bool fill_on_read = true;
  // Fetched chunks, in bytes, that may wait to be stored after their readers
  // were answered; past it, chunks are served but not stored.
  uint64_t write_behind_bytes = 256 << 20;
  // The only directories datasets may be registered from (a source must be
  // one of them or lie beneath one). Empty: no dataset can be registered.
  std::vector<std::string> source_roots;
  // The only S3 endpoints (scheme://host[:port]) datasets may be registered
  // from. Empty: no S3 dataset can be registered.
  std::vector<std::string> s3_endpoints;
  // How long one request to an S3 endpoint may take to connect, and to be
  // answered in full; a request past either is retried, and fails once the
  // retries are spent. An endpoint that accepts connections and never
  // answers costs a read about that many attempts of the request timeout.
  uint32_t s3_connect_timeout_ms = 5000;
  uint32_t s3_request_timeout_ms = 60000;
  // By endpoint (one of s3_endpoints): the credentials profile that signs
  // requests to it for datasets that name none of their own, in place of
  // AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY and AWS_PROFILE
  // (source/s3_credentials.h).
  std::map<std::string, std::string> s3_endpoint_profiles;
  // Members of this group may register, refresh and remove datasets over
  // the Unix socket, as root may; empty: root alone.
  std::string admin_group;
  // How many datasets the catalog holds, and how many entries (files,
  // directories, links) one dataset version may have: a registration over
  // either is refused, so that no caller exhausts granaryd's memory.
  uint32_t max_datasets = 1000;
  uint32_t max_dataset_entries = 5'000'000;
  // How many paths one prewarm request may name.
  uint32_t max_prewarm_paths = 10'000;
  // Prewarms of local callers who are not administrators: how many run at
  // once, overall and of one uid (each with at most prewarm_parallelism
  // workers), and the fraction of the capacity what one uid's prewarms may
  // hold in the cache. Administrators' prewarms are bound only by granaryd's
  // own ceilings (cache_server/prewarm/prewarm_limits.h).
  uint32_t max_prewarms = 8;
  uint32_t max_prewarms_per_user = 2;
  double prewarm_user_share = 0.25;
  // Connections to the gRPC service at once: overall, from one local uid,
  // from one remote host. Connections over a limit are closed at once.
  uint32_t max_connections = 4096;
  uint32_t max_connections_per_user = 256;
  uint32_t max_connections_per_host = 256;
  // TCP connections that have not presented the cluster token yet (peer read
  // hellos), overall and from one remote host: counted apart from the
  // others, so that whoever reaches the port cannot take the members'
  // places; one over either limit is closed at once.
  uint32_t max_unauthenticated_connections = 32;
  uint32_t max_unauthenticated_connections_per_host = 8;
  // Calls at once on one connection (HTTP/2 MAX_CONCURRENT_STREAMS).
  uint32_t max_streams_per_connection = 100;
  // Threads serving calls; calls beyond them get RESOURCE_EXHAUSTED.
  uint32_t max_threads = 512;
  // A streaming reply whose reader takes nothing for this long is cancelled.
  uint32_t stream_stall_seconds = 60;
  // An older dataset version is released (dropped from the catalog, its
  // chunks freed) once it has been retired this long and no mount on this
  // node kept it for this long (cache_server/catalog/version_releaser.h).
  uint32_t version_grace_seconds = 300;
  // A dataset one of whose source files a read found with its metadata
  // alone changed (a chmod, a chown, a hard link) is refreshed without
  // anyone asking, at most once per this many seconds
  // (cache_server/catalog/source_change_refresher.h).
  uint32_t source_refresh_interval_seconds = 60;
  // Every this often, granaryd publishes what it holds of each dataset to one
  // random peer and learns the others' reports (LocalityBoard); Locate reads
  // reports up to locality_max_age_seconds old and leaves older ones out.
  uint32_t locality_period_ms = 1000;
  uint32_t locality_max_age_seconds = 30;
  // The memory, in MiB, that the manifests of dataset versions may take in
  // granaryd; past it, those least recently used and not in use are dropped
  // from memory, and loaded from the catalog again when next needed
  // (cache_server/catalog/catalog.h).
  uint32_t manifest_memory_mib = 1024;
  // Stage-ins of batch jobs (cache_server/staging/): the Slurm client run to
  // read the queue (on PATH unless a path; its cluster is the one SLURM_CONF
  // names in granaryd's environment, as for any Slurm client), and how often
  // the queue is read while some job is followed.
  std::string scontrol = "scontrol";
  uint32_t stage_in_poll_ms = 5000;
  // The share of the capacity that datasets held for pending and running
  // jobs may take on this node (cache_server/holds/hold_table.h); past it, a
  // new hold is refused and its job reads through.
  double hold_share = 0.5;
  // A dataset version nobody read, prewarmed or held for this long is
  // inactive: eviction takes it first.
  uint32_t active_after_seconds = 300;
  // The jobs whose reads on this node are listed (granary jobs, /metrics)
  // apart, as (job, dataset) pairs; beyond it, and once a pair has read
  // nothing for job_idle_seconds, pairs are summed into one "other" entry
  // (common/jobs/job_reads.h).
  uint32_t max_job_series = 256;
  uint32_t job_idle_seconds = 600;
  // Where each ended job's receipt is written as a file
  // (cache_server/status/job_receipts.h); empty: receipts are kept in
  // granaryd's memory only.
  std::string receipt_dir;
  // A file every source read, and every change to what the cache holds, is
  // appended to (cache_server/read_path/source_journal.h); empty: none.
  std::string source_journal;
};

// A capacity such as "200GiB"; INVALID_ARGUMENT for a bad size or 0.
absl::StatusOr<uint64_t> ParseCapacity(std::string_view text);

// Where granaryd listens on TCP: `listen` when set, kDefaultListenAddress for
// a configured cluster, "" (no TCP listener) otherwise.
std::string TcpListenAddress(const GranarydConfig& config);

// The rule for TCP: a TCP listener needs a cluster token file, unless
// insecure_tcp says otherwise. FAILED_PRECONDITION naming the rule and the
// fix when it is broken.
absl::Status CheckTcpPolicy(const GranarydConfig& config);

// The embedded single-node default: DefaultDataDir(), DefaultSocketPath(),
// kDefaultMetricsAddress, and no TCP listener.
GranarydConfig DefaultGranarydConfig();

// Overlays the keys present in the YAML text on `config`. `origin` names the
// text in errors (normally the file's path).
absl::Status ApplyConfigYaml(std::string_view yaml, std::string_view origin,
                             GranarydConfig* config);

// Reads `path` and applies it; NOT_FOUND or PERMISSION_DENIED naming the file
// when it cannot be read.
absl::Status ApplyConfigFile(const std::string& path, GranarydConfig* config);

// Checks a HOST:PORT value; INVALID_ARGUMENT naming `what` and the value.
absl::Status ValidateHostPort(std::string_view what, std::string_view value);

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_CONFIG_CONFIG_H_
