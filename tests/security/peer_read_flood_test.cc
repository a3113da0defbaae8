// Finding 3 of the second trust-boundary review: whoever reaches granaryd's TCP
// port, without the token, must not stop the cluster's peer reads. A user
// floods both nodes of a two-node cluster with hundreds of unfinished peer
// read hellos each from a second address, reconnecting each one a node
// closes, while a token holder reads over TCP, through one node, files whose
// chunks that node owns: every read is served, with the right bytes. From
// the reader's own address the flood fills that host's budget; the reader's
// peer reads are then turned away and made over gRPC, and served all the same.
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
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache_server/read_path/peer_read_server.h"
#include "client/dataset_client.h"
#include "client/peer_read_connections.h"
#include "client/peer_read_protocol.h"
#include "common/cluster/cluster_map.h"
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
// The cluster's address, and a second one of the same host.
constexpr char kClusterAddress[] = "127.0.0.1";
constexpr char kSecondAddress[] = "127.0.0.2";
constexpr uint32_t kChunkSize = 1 << 20;
constexpr int kFiles = 16;
constexpr size_t kFileSize = 200 << 10;

std::string FileBytes(int file) { return testing::PatternBytes(kFileSize, 100 + file); }

// Holds `connections` connections from `source` to 127.0.0.1:`port`,
// each in an unfinished peer read hello (the magic alone), as `user`, and
// opens a new one for each the server closes, until destroyed.
class HelloFlood {
 public:
  HelloFlood(const TestUser& user, std::string source, int port, int connections)
      : user_(user), source_(std::move(source)), port_(port), slots_(connections) {
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
    ::inet_pton(AF_INET, source_.c_str(), &local.sin_addr);
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
  const std::string source_;
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

// A cluster of two nodes, a and b, with a dataset of one-chunk files, and
// which of them b owns.
class PeerReadFloodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto user = testing::EnsureTestUser(kUser);
    ASSERT_TRUE(user.ok()) << user.status();
    user_ = *user;
    for (int file = 0; file < kFiles; ++file) {
      testing::WriteSourceFile(source_.path(), "file" + std::to_string(file), FileBytes(file));
    }
    auto cluster = GranaryCluster::StartFormed(
        {.nodes = {{"a"}, {"b"}}, .etcd_endpoint = "", .extra_args = {}});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    absl::StatusOr<v1::DatasetInfo> registered =
        cluster_->RegisterDataset(0, "flood", source_.path(), kChunkSize);
    ASSERT_TRUE(registered.ok()) << registered.status();
    auto snapshot =
        (*DatasetClient::Connect(cluster_->node(0).socket_address()))->GetManifest("flood");
    ASSERT_TRUE(snapshot.ok()) << snapshot.status();
    auto map = ClusterMap::Build(cluster_->Members());
    ASSERT_TRUE(map.ok()) << map.status();
    const ManifestEntries& entries = snapshot->manifest.entries();
    for (uint64_t id = 0; id < entries.size(); ++id) {
      if (entries[id].type != EntryType::kFile) continue;
      const ChunkKey key{registered->version(), id, 0};
      if ((*map)->Owners(key, kDefaultGroup, 1)[0]->id != "b") continue;
      owned_by_b_.push_back(std::stoi(entries[id].path.substr(4)));
      keys_of_b_.push_back(key);
    }
    ASSERT_FALSE(owned_by_b_.empty());
  }

  int port(size_t node) { return PortOf(cluster_->node(node).tcp_address()); }

  // Runs `cats` times root's granary cat, with the token, over TCP through
  // b, of the files b owns: how many gave their bytes; the first failure in
  // `*failure`.
  int CatFilesOfB(int cats, std::string* failure) {
    int served = 0;
    for (int i = 0; i < cats; ++i) {
      const int file = owned_by_b_[i % owned_by_b_.size()];
      auto cat = testing::Run({testing::CliPath(), "--server", cluster_->node(1).tcp_address(),
                               "--token-file", cluster_->cluster_token_file(), "cat",
                               "flood/file" + std::to_string(file)});
      if (cat.ok() && cat->exit_code == 0 && cat->stdout_text == FileBytes(file)) {
        ++served;
      } else if (failure->empty()) {
        *failure =
            cat.ok() ? absl::StrCat("file", file, ": exit ", cat->exit_code, ": ", cat->stderr_text)
                     : cat.status().ToString();
      }
    }
    return served;
  }

  // Reads each chunk b owns from b over the peer read protocol with the
  // token, from the cluster's address: how many reads were made and gave
  // the chunk's bytes, and how many b turned away.
  struct DirectReads {
    int served = 0;
    int turned_away = 0;
  };
  DirectReads ReadChunksOfB() {
    PeerReadConnections direct(cluster_->node(1).tcp_address(), cluster_->node(1).cluster_token(),
                               std::chrono::seconds(10));
    DirectReads reads;
    for (size_t i = 0; i < keys_of_b_.size(); ++i) {
      v1::ReadChunkRequest request;
      keys_of_b_[i].ToProto(request.mutable_key());
      request.set_length(kFileSize);
      std::string out(kFileSize, '\0');
      PeerReadConnections::Result read = direct.Read(request, out);
      if (read.outcome == PeerReadConnections::Outcome::kTurnedAway) ++reads.turned_away;
      if (read.outcome == PeerReadConnections::Outcome::kRead && read.status.ok() &&
          out == FileBytes(owned_by_b_[i])) {
        ++reads.served;
      }
    }
    return reads;
  }

  // b's lines about connections closed at once: how many, and the first.
  std::pair<size_t, std::string> ClosedAtOnceLines() {
    const std::string log = cluster_->node(1).log();
    constexpr std::string_view kLine = "peer reads: closed";
    size_t lines = 0;
    for (size_t at = log.find(kLine); at != std::string::npos; at = log.find(kLine, at + 1)) {
      ++lines;
    }
    const size_t first = log.find(kLine);
    return {lines, first == std::string::npos ? std::string("none")
                                              : log.substr(first, log.find('\n', first) - first)};
  }

  static constexpr int kHeld = 300;
  static constexpr int kCats = 40;
  TestUser user_;
  TempDir source_;
  std::unique_ptr<GranaryCluster> cluster_;
  std::vector<int> owned_by_b_;
  std::vector<ChunkKey> keys_of_b_;
};

TEST_F(PeerReadFloodTest, HellosHeldFromAnotherAddressStopNoReadOfATokenHolder) {
  const auto flood_started = std::chrono::steady_clock::now();
  HelloFlood flood_a(user_, kSecondAddress, port(0), kHeld);
  HelloFlood flood_b(user_, kSecondAddress, port(1), kHeld);
  // Past a hello deadline, so that the floods have come back for what the
  // nodes closed.
  std::this_thread::sleep_for(PeerReadServer::kHelloTimeout + std::chrono::seconds(1));
  std::string failure;
  const int served = CatFilesOfB(kCats, &failure);
  // b welcomes a token holder's own peer reads while the flood lasts.
  const DirectReads direct = ReadChunksOfB();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::steady_clock::now() - flood_started)
                           .count();
  EXPECT_EQ(served, kCats) << failure;
  EXPECT_EQ(direct.served, static_cast<int>(keys_of_b_.size()));
  // The floods ran the whole time, and the nodes closed most of them at once.
  for (const HelloFlood* flood : {&flood_a, &flood_b}) {
    EXPECT_GT(flood->opened(), static_cast<uint64_t>(kHeld));
    EXPECT_GT(flood->closed_at_once(), static_cast<uint64_t>(kHeld));
  }
  // Logged at most once per 10 s, not once per connection.
  const auto [lines, first_line] = ClosedAtOnceLines();
  EXPECT_GE(lines, 1u);
  EXPECT_LE(lines, static_cast<size_t>(seconds / 10 + 2));
  ReportAttack(
      {"2.3",
       absl::StrCat("a user without the token holds ", kHeld,
                    " unfinished peer read hellos on each node of a cluster of two from ",
                    kSecondAddress,
                    ", reconnecting as they are closed, while root (token holder) runs granary "
                    "--server NODE_B:PORT cat of files node b owns"),
       "TCP",
       "every read served with the right bytes; the flood's connections past a small budget "
       "closed at once, logged at most once per 10 s",
       absl::StrCat(served, " of ", kCats, " cats and ", direct.served, " of ", keys_of_b_.size(),
                    " direct peer reads served right in ", seconds, " s; the flood on b opened ",
                    flood_b.opened(), " connections, ", flood_b.closed_at_once(),
                    " closed at once and ", flood_b.closed_later(), " at the hello deadline; b's ",
                    lines, " log lines, first: ", first_line)});
}

TEST_F(PeerReadFloodTest, HellosHeldFromTheReadersOwnAddressSendItsReadsOverGrpc) {
  // The flood comes from the address the reader reads from: its hellos meet
  // a full budget for their host, and each read goes over gRPC instead.
  HelloFlood flood_b(user_, kClusterAddress, port(1), kHeld);
  std::this_thread::sleep_for(PeerReadServer::kHelloTimeout + std::chrono::seconds(1));
  const DirectReads direct = ReadChunksOfB();
  std::string failure;
  const int served = CatFilesOfB(kCats, &failure);
  EXPECT_EQ(served, kCats) << failure;
  EXPECT_GT(direct.turned_away, 0);
  EXPECT_GT(flood_b.closed_at_once(), static_cast<uint64_t>(kHeld));
  ReportAttack(
      {"2.3",
       absl::StrCat("a user without the token holds ", kHeld,
                    " unfinished peer read hellos on node b from the reader's own address (",
                    kClusterAddress,
                    "), reconnecting as they are closed, while root (token holder) runs granary "
                    "--server NODE_B:PORT cat of files node b owns"),
       "TCP", "the reader's turned-away peer reads made over gRPC: every read served",
       absl::StrCat(served, " of ", kCats, " cats served right; ", direct.turned_away, " of ",
                    keys_of_b_.size(), " direct peer reads turned away; the flood opened ",
                    flood_b.opened(), " connections, ", flood_b.closed_at_once(),
                    " closed at once")});
}

}  // namespace
}  // namespace granary
