// Remote chunk reads between two granaryd on loopback against iperf3, in one
// run so the ratio compares like with like on a noisy, shared machine.
//
// Starts a cluster of two real granaryd (tests/support/granary_cluster.h),
// nodes "a" and "b" in one cache group, registers a dataset of --files files
// of --file_mib MiB (4 MiB chunks) on node b, reads every chunk once through
// b's TCP address so b holds them all, and checks with cache-only reads that
// it does. Then, --repetitions times, interleaved:
//   granary: --streams threads in this process (node a's side of the link)
//            each read cached 4 MiB chunks from b's TCP address with
//            DatasetClient::ReadChunk(cache_only) -- exactly how a peer
//            copies a chunk -- for --seconds; bytes/s over all threads.
//            Channels are Granary's own (MakeChannel). --connections=peers
//            reads through a MemberClients pool, as a node reads from its
//            peers (MemberClients::kConnectionsPerMember connections to b);
//            --connections=per-stream gives each thread its own connection.
//   iperf3:  `iperf3 -s -1` and `iperf3 -c 127.0.0.1 -P <streams> -t <seconds>
//            -J`; received bits/s.
// Prints one line per repetition and the median of the per-repetition ratios.
//
// Usage: remote_read_bench [--streams=4] [--seconds=4] [--repetitions=5]
//            [--files=12] [--file_mib=16] [--connections=per-stream|peers|both]
//            [--unix_socket=true]
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/dataset_client.h"
#include "client/member_clients.h"
#include "common/cluster/cluster_map.h"
#include "common/net/server_address.h"
#include "tests/support/granary_cluster.h"

namespace granary {
namespace {

constexpr uint32_t kChunk = 4u << 20;

struct Flags {
  int streams = 4;
  double seconds = 4;
  int repetitions = 5;
  int files = 12;
  int file_mib = 16;
  std::string connections = "both";
  // Also read b's chunks over its Unix socket (per-stream channels): the
  // same server and client code without TCP, to tell transport from server.
  bool unix_socket = false;
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "remote_read_bench: %s\n", what.c_str());
  std::exit(1);
}

std::string Flag(const char* arg, const char* name) {
  size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) == 0 && arg[n] == '=') return arg + n + 1;
  return {};
}

std::vector<ChunkKey> DatasetChunks(const DatasetSnapshot& snapshot) {
  std::vector<ChunkKey> keys;
  const auto& entries = snapshot.manifest.entries();
  uint32_t chunk = snapshot.info.chunk_size();
  for (size_t id = 0; id < entries.size(); ++id) {
    if (entries[id].type != EntryType::kFile) continue;
    for (uint64_t c = 0; c * chunk < entries[id].size; ++c) {
      keys.push_back(ChunkKey{snapshot.info.version(), id, static_cast<uint32_t>(c)});
    }
  }
  return keys;
}

// Bytes/s of cache-only ReadChunk of `keys` by `streams` threads for
// `seconds`; thread s reads through reader(s), called for every read.
double GranaryRate(const std::function<const DatasetClient*(int)>& reader,
                   const std::vector<ChunkKey>& keys, int streams, double seconds) {
  // Connect and touch every channel before the clock starts.
  std::vector<char> probe(kChunk);
  for (int s = 0; s < std::max(streams, MemberClients::kConnectionsPerMember); ++s) {
    absl::Status read =
        reader(s % streams)->ReadChunk(keys[0], 0, probe, ChunkSourcing::kCacheOnly);
    if (!read.ok()) Die("warm-up read: " + std::string(read.message()));
  }
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> total{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < streams; ++s) {
    threads.emplace_back([&, s] {
      std::vector<char> buffer(kChunk);
      size_t next = static_cast<size_t>(s) * keys.size() / streams;
      uint64_t bytes = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        absl::Status read = reader(s)->ReadChunk(keys[next], 0, buffer, ChunkSourcing::kCacheOnly);
        if (!read.ok()) {
          errors.fetch_add(1);
          std::fprintf(stderr, "read %s: %s\n", keys[next].ToString().c_str(),
                       std::string(read.message()).c_str());
          break;
        }
        bytes += buffer.size();
        next = (next + 1) % keys.size();
      }
      total.fetch_add(bytes);
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (errors.load() != 0) Die("chunk reads failed");
  return static_cast<double>(total.load()) / elapsed;
}

// Received bytes/s of `iperf3 -c 127.0.0.1 -P streams -t seconds`, against a
// one-shot server started here.
double IperfRate(int streams, double seconds) {
  int port = testing::FreeTcpPort();
  pid_t server = ::fork();
  if (server == 0) {
    std::string p = std::to_string(port);
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::execlp("iperf3", "iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", p.c_str(), (char*)nullptr);
    std::_Exit(127);
  }
  std::string json;
  for (int attempt = 0;; ++attempt) {  // Wait for the server to listen.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::string command = "iperf3 -c 127.0.0.1 -p " + std::to_string(port) + " -P " +
                          std::to_string(streams) + " -t " + std::to_string(seconds) + " -J 2>&1";
    FILE* pipe = ::popen(command.c_str(), "r");
    char buffer[4096];
    size_t n;
    json.clear();
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) json.append(buffer, n);
    if (::pclose(pipe) == 0) break;
    if (attempt == 20) Die("iperf3 client failed: " + json);
  }
  // `iperf3 -s -1` usually exits after its one test, but not always (it can
  // stay up after a refused early attempt): never wait on it for long.
  for (int waited = 0; ::waitpid(server, nullptr, WNOHANG) == 0; ++waited) {
    if (waited == 20) {
      ::kill(server, SIGTERM);
      ::waitpid(server, nullptr, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // "sum_received": { ... "bits_per_second": X ... } in "end".
  size_t at = json.find("\"sum_received\"");
  if (at == std::string::npos) Die("no sum_received in iperf3 output: " + json);
  at = json.find("\"bits_per_second\"", at);
  if (at == std::string::npos) Die("no bits_per_second in iperf3 output");
  at = json.find(':', at);
  return std::strtod(json.c_str() + at + 1, nullptr) / 8;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int Main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (!(v = Flag(argv[i], "--streams")).empty())
      flags.streams = std::atoi(v.c_str());
    else if (!(v = Flag(argv[i], "--seconds")).empty())
      flags.seconds = std::atof(v.c_str());
    else if (!(v = Flag(argv[i], "--repetitions")).empty())
      flags.repetitions = std::atoi(v.c_str());
    else if (!(v = Flag(argv[i], "--files")).empty())
      flags.files = std::atoi(v.c_str());
    else if (!(v = Flag(argv[i], "--file_mib")).empty())
      flags.file_mib = std::atoi(v.c_str());
    else if (!(v = Flag(argv[i], "--connections")).empty())
      flags.connections = v;
    else if (!(v = Flag(argv[i], "--unix_socket")).empty())
      flags.unix_socket = v == "true";
    else
      Die(std::string("unknown flag ") + argv[i]);
  }
  ::signal(SIGPIPE, SIG_IGN);

  testing::TempDir source;
  std::string block(static_cast<size_t>(flags.file_mib) << 20, '\0');
  for (int f = 0; f < flags.files; ++f) {
    for (size_t i = 0; i < block.size(); i += 8) {
      uint64_t word = (static_cast<uint64_t>(f) << 40) ^ (i * 0x9E3779B97F4A7C15ull);
      std::memcpy(block.data() + i, &word, 8);
    }
    std::ofstream(source.path() + "/f" + std::to_string(f), std::ios::binary)
        .write(block.data(), static_cast<std::streamsize>(block.size()));
  }

  testing::GranaryCluster::Options cluster_options;
  cluster_options.nodes = {{"a", "g"}, {"b", "g"}};
  auto cluster = testing::GranaryCluster::Start(std::move(cluster_options));
  if (!cluster.ok()) Die(std::string(cluster.status().message()));
  testing::GranarydProcess& b = (*cluster)->node(1);
  if (absl::Status s = (*cluster)->WaitForMembers(1, {"a", "b"}); !s.ok()) {
    Die(std::string(s.message()));
  }
  {
    v1::AddDatasetRequest request;
    request.set_name("remote");
    request.set_source(source.path());
    request.set_chunk_size(kChunk);
    v1::DatasetInfo info;
    grpc::ClientContext context;
    grpc::Status status = b.SocketStub()->AddDataset(&context, request, &info);
    if (!status.ok()) Die("AddDataset: " + status.error_message());
  }
  // Peers present the cluster's token on TCP, as these clients do.
  DatasetClient::Options client_options;
  client_options.cluster_token = b.cluster_token();
  auto reader = DatasetClient::Connect(b.tcp_address(), client_options);
  if (!reader.ok()) Die(std::string(reader.status().message()));
  auto snapshot = (*reader)->GetManifest("remote");
  if (!snapshot.ok()) Die(std::string(snapshot.status().message()));
  std::vector<ChunkKey> keys = DatasetChunks(*snapshot);
  // Read-through on b stores every chunk on b (from the source, or copied
  // from a); then a cache-only pass proves b holds them all.
  std::vector<char> buffer(kChunk);
  for (const ChunkKey& key : keys) {
    absl::Status s = (*reader)->ReadChunk(key, 0, buffer, ChunkSourcing::kReadThrough);
    if (!s.ok()) Die("warming " + key.ToString() + ": " + std::string(s.message()));
  }
  for (const ChunkKey& key : keys) {
    absl::Status s = (*reader)->ReadChunk(key, 0, buffer, ChunkSourcing::kCacheOnly);
    if (!s.ok()) Die("node b does not hold " + key.ToString() + ": " + std::string(s.message()));
  }
  std::printf("dataset: %zu chunks of 4 MiB on node b (%s); %d streams, %.1f s each, %d reps\n",
              keys.size(), b.tcp_address().c_str(), flags.streams, flags.seconds,
              flags.repetitions);

  struct Mode {
    std::string name;
    std::string address;
    bool peers;  // Through a MemberClients pool, else one connection per stream.
  };
  std::vector<Mode> modes;
  if (flags.connections != "peers") modes.push_back({"per-stream", b.tcp_address(), false});
  if (flags.connections != "per-stream") modes.push_back({"peers", b.tcp_address(), true});
  if (flags.unix_socket) modes.push_back({"unix-socket", b.socket_address(), false});
  std::vector<std::vector<double>> ratios(modes.size()), rates(modes.size());
  std::vector<double> iperf;
  for (int rep = 1; rep <= flags.repetitions; ++rep) {
    double ip = IperfRate(flags.streams, flags.seconds);
    iperf.push_back(ip);
    std::printf("rep %d: iperf3 -P %d %.0f MB/s", rep, flags.streams, ip / 1e6);
    for (size_t m = 0; m < modes.size(); ++m) {
      // Fresh connections for every measurement.
      double g;
      if (modes[m].peers) {
        MemberClients::Options pool_options;
        pool_options.client = client_options;
        MemberClients pool{pool_options};
        Member member;
        member.id = "b";
        member.address = modes[m].address;
        g = GranaryRate(
            [&](int) {
              auto reader = pool.Reader(member);
              if (!reader.ok()) Die(std::string(reader.status().message()));
              return *reader;
            },
            keys, flags.streams, flags.seconds);
      } else {
        std::vector<std::unique_ptr<DatasetClient>> clients;
        for (int s = 0; s < flags.streams; ++s) {
          auto channel = MakeChannel(modes[m].address, client_options.cluster_token,
                                     /*own_connection=*/true);
          if (!channel.ok()) Die(std::string(channel.status().message()));
          clients.push_back(DatasetClient::OverChannel(modes[m].address, client_options, *channel));
        }
        g = GranaryRate([&](int s) { return clients[s].get(); }, keys, flags.streams,
                        flags.seconds);
      }
      rates[m].push_back(g);
      ratios[m].push_back(g / ip);
      std::printf(" | granary %s %.0f MB/s (%.3f)", modes[m].name.c_str(), g / 1e6, g / ip);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  auto source_reads = b.Metric("granary_source_reads_total");
  std::printf("median iperf3: %.0f MB/s\n", Median(iperf) / 1e6);
  for (size_t m = 0; m < modes.size(); ++m) {
    std::printf("median granary %s: %.0f MB/s; median ratio granary/iperf3 = %.3f\n",
                modes[m].name.c_str(), Median(rates[m]) / 1e6, Median(ratios[m]));
  }
  if (source_reads.ok()) std::printf("node b source reads: %.0f\n", *source_reads);
  return 0;
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) { return granary::Main(argc, argv); }
