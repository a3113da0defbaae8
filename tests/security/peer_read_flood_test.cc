// Finding 3 of the second trust-boundary review: whoever reaches granaryd's TCP
// port, without the token, must not stop the cluster's peer reads. A user
// floods both nodes of a two-node cluster with hundreds of unfinished peer
// read hellos each from a second address, reconnecting each one a node
// closes, while a token holder reads over TCP, through one node, files whose
// chunks that node owns: every read is served, with the right bytes.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/dataset_client.h"
#include "client/peer_read_connections.h"
#include "client/peer_read_protocol.h"
#include "common/cluster_map.h"
#include "tests/security/security_support.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granary_cluster.h"

namespace granary {
namespace {

using testing::GranaryCluster;
using testing::ReportAttack;
using testing::TempDir;
using testing::TestUser;

constexpr char kUser[] = "granary-flooder";
constexpr char kFloodAddress[] = "127.0.0.2";
constexpr uint32_t kChunkSize = 1 << 20;
constexpr int kFiles = 16;
constexpr size_t kFileSize = 200 << 10;

std::string FileBytes(int file) { return testing::PatternBytes(kFileSize, 100 + file); }

// Holds `connections` connections from kFloodAddress to 127.0.0.1:`port`,
// each in an unfinished peer read hello (the magic alone), as `user`, and
// opens a new one for each the server closes, until destroyed.
class HelloFlood {
 public:
  HelloFlood(const TestUser& user, int port, int connections)
      : user_(user), port_(port), slots_(connections) {
    thread_ = std::thread([this] { Run(); });
  }
  ~HelloFlood() {
    stop_ = true;
    thread_.join();
  }

  uint64_t opened() const { return opened_.load(); }
  // Closed by the server within a second of their opening, and later.
  uint64_t closed_at_once() const { return closed_at_once_.load(); }
  uint64_t closed_later() const { return closed_later_.load(); }

 private:
  struct Slot {
    int fd = -1;
    std::chrono::steady_clock::time_point opened;
  };

  int Open() const {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    ::inet_pton(AF_INET, kFloodAddress, &local.sin_addr);
    sockaddr_in server{};
    server.sin_family = AF_INET;
    server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    server.sin_port = htons(static_cast<uint16_t>(port_));
    const timeval limit{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0 ||
        ::connect(fd, reinterpret_cast<sockaddr*>(&server), sizeof(server)) != 0 ||
        ::send(fd, kPeerReadMagic, sizeof(kPeerReadMagic), MSG_NOSIGNAL) !=
            static_cast<ssize_t>(sizeof(kPeerReadMagic))) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  void Run() {
    // This thread's credentials alone become the user's (raw system calls:
    // glibc's would change every thread's).
    const gid_t groups[] = {user_.gid};
    if (::syscall(SYS_setgroups, 1, groups) != 0 ||
        ::syscall(SYS_setresgid, user_.gid, user_.gid, user_.gid) != 0 ||
        ::syscall(SYS_setresuid, user_.uid, user_.uid, user_.uid) != 0) {
      ADD_FAILURE() << "cannot become " << user_.name;
      return;
    }
    std::vector<pollfd> polled(slots_.size());
    while (!stop_) {
      for (size_t i = 0; i < slots_.size(); ++i) {
        if (slots_[i].fd < 0 && (slots_[i].fd = Open()) >= 0) {
          slots_[i].opened = std::chrono::steady_clock::now();
          ++opened_;
        }
        polled[i] = {slots_[i].fd, POLLIN, 0};
      }
      // Rounds of 100 ms: thousands of connections a second, yet CPU left
      // for the readers on a small test machine.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (::poll(polled.data(), polled.size(), 0) <= 0) continue;
      for (size_t i = 0; i < slots_.size(); ++i) {
        char byte;
        if (polled[i].revents == 0 || ::recv(slots_[i].fd, &byte, 1, MSG_DONTWAIT) > 0) continue;
        ::close(slots_[i].fd);
        slots_[i].fd = -1;
        if (std::chrono::steady_clock::now() - slots_[i].opened < std::chrono::seconds(1)) {
          ++closed_at_once_;
        } else {
          ++closed_later_;
        }
      }
    }
    for (const Slot& slot : slots_) {
      if (slot.fd >= 0) ::close(slot.fd);
    }
  }

  const TestUser user_;
  const int port_;
  std::vector<Slot> slots_;  // The thread's own.
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> opened_{0};
  std::atomic<uint64_t> closed_at_once_{0};
  std::atomic<uint64_t> closed_later_{0};
  std::thread thread_;
};

int PortOf(const std::string& host_port) {
  return std::stoi(host_port.substr(host_port.rfind(':') + 1));
}

TEST(PeerReadFlood, HellosHeldFromAnotherAddressStopNoReadOfATokenHolder) {
  auto user = testing::EnsureTestUser(kUser);
  ASSERT_TRUE(user.ok()) << user.status();
  TempDir source;
  for (int file = 0; file < kFiles; ++file) {
    testing::WriteSourceFile(source.path(), "file" + std::to_string(file), FileBytes(file));
  }
  auto cluster =
      GranaryCluster::Start({.nodes = {{"a"}, {"b"}}, .etcd_endpoint = "", .extra_args = {}});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  GranaryCluster& nodes = **cluster;
  ASSERT_TRUE(nodes.WaitForPeersReachable().ok());
  v1::DatasetInfo info;
  grpc::Status added = testing::AddDataset(nodes.node(0).SocketStub().get(), "flood", source.path(),
                                           kChunkSize, &info);
  ASSERT_TRUE(added.ok()) << added.error_message();
  ASSERT_TRUE(nodes.WaitForDataset(1, "flood", info.version()).ok());

  // The files whose one chunk b owns.
  auto snapshot = (*DatasetClient::Connect(nodes.node(0).socket_address()))->GetManifest("flood");
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  auto map = ClusterMap::Build(nodes.Members());
  ASSERT_TRUE(map.ok()) << map.status();
  std::vector<int> owned_by_b;
  std::vector<ChunkKey> keys_of_b;
  const ManifestEntries& entries = snapshot->manifest.entries();
  for (uint64_t id = 0; id < entries.size(); ++id) {
    if (entries[id].type != EntryType::kFile) continue;
    const ChunkKey key{info.version(), id, 0};
    if ((*map)->Owners(key, kDefaultGroup, 1)[0]->id != "b") continue;
    owned_by_b.push_back(std::stoi(entries[id].path.substr(4)));
    keys_of_b.push_back(key);
  }
  ASSERT_FALSE(owned_by_b.empty());

  const std::string b_address = nodes.node(1).tcp_address();
  constexpr int kHeld = 300;
  const auto flood_started = std::chrono::steady_clock::now();
  HelloFlood flood_a(*user, PortOf(nodes.node(0).tcp_address()), kHeld);
  HelloFlood flood_b(*user, PortOf(b_address), kHeld);
  // Past a hello deadline, so that the flood has come back for what the
  // nodes closed.
  std::this_thread::sleep_for(std::chrono::seconds(4));

  constexpr int kCats = 40;
  int served = 0;
  std::string failures;
  for (int i = 0; i < kCats; ++i) {
    const int file = owned_by_b[i % owned_by_b.size()];
    auto cat =
        testing::Run({testing::CliPath(), "--server", b_address, "--token-file",
                      nodes.cluster_token_file(), "cat", "flood/file" + std::to_string(file)});
    ASSERT_TRUE(cat.ok()) << cat.status();
    if (cat->exit_code == 0 && cat->stdout_text == FileBytes(file)) {
      ++served;
    } else if (failures.empty()) {
      failures = absl::StrCat("file", file, ": exit ", cat->exit_code, ": ", cat->stderr_text);
    }
  }
  // And straight over the peer read protocol, from the cluster's address:
  // b welcomes a token holder while the flood lasts.
  PeerReadConnections direct(b_address, nodes.node(1).cluster_token(), std::chrono::seconds(10));
  int direct_served = 0;
  for (const ChunkKey& key : keys_of_b) {
    v1::ReadChunkRequest request;
    key.ToProto(request.mutable_key());
    request.set_length(kFileSize);
    std::string out(kFileSize, '\0');
    PeerReadConnections::Result read = direct.Read(request, out);
    const int file = owned_by_b[&key - keys_of_b.data()];
    EXPECT_EQ(read.outcome, PeerReadConnections::Outcome::kRead) << read.status;
    EXPECT_TRUE(read.status.ok()) << read.status;
    if (read.status.ok() && out == FileBytes(file)) ++direct_served;
  }
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::steady_clock::now() - flood_started)
                           .count();
  EXPECT_EQ(served, kCats) << failures;
  EXPECT_EQ(direct_served, static_cast<int>(keys_of_b.size()));
  // The floods ran the whole time, and the nodes closed most of them at once.
  for (const HelloFlood* flood : {&flood_a, &flood_b}) {
    EXPECT_GT(flood->opened(), static_cast<uint64_t>(kHeld));
    EXPECT_GT(flood->closed_at_once(), static_cast<uint64_t>(kHeld));
  }
  // Its refusals are logged at most once per 10 s, not once per connection.
  const std::string log = nodes.node(1).log();
  size_t lines = 0;
  for (size_t at = log.find("peer reads: closed"); at != std::string::npos;
       at = log.find("peer reads: closed", at + 1)) {
    ++lines;
  }
  EXPECT_GE(lines, 1u);
  EXPECT_LE(lines, static_cast<size_t>(seconds / 10 + 2)) << log;
  const size_t first_line = log.find("peer reads: closed");
  ReportAttack(
      {"2.3",
       absl::StrCat("a user without the token holds ", kHeld,
                    " unfinished peer read hellos on each node of a cluster of two from ",
                    kFloodAddress,
                    ", reconnecting as they are closed, while root (token holder) runs granary "
                    "--server NODE_B:PORT cat of files node b owns"),
       "TCP",
       "every read served with the right bytes; the flood's connections past a small budget "
       "closed at once, logged at most once per 10 s",
       absl::StrCat(served, " of ", kCats, " cats and ", direct_served, " of ", keys_of_b.size(),
                    " direct peer reads served right in ", seconds, " s; the flood on b opened ",
                    flood_b.opened(), " connections, ", flood_b.closed_at_once(),
                    " closed at once and ", flood_b.closed_later(), " at the hello deadline; b's ",
                    lines, " log lines, first: ",
                    first_line == std::string::npos
                        ? std::string("none")
                        : log.substr(first_line, log.find('\n', first_line) - first_line))});
}

}  // namespace
}  // namespace granary
