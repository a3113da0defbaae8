#include "fuse_client/restarts/connection_keeper.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/absl_compat.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/dataset/hash.h"
#include "common/net/datagram_socket.h"
#include "fuse_client/kernel/detach_mount.h"
#include "fuse_client/kernel/kernel_channel.h"
#include "fuse_client/restarts/open_journal.h"
#include "fuse_client/restarts/standard_streams.h"
#include "proto/connection_keeper.pb.h"

namespace granary::fuse {
namespace {

using Clock = std::chrono::steady_clock;

// How long a running server asked to stop has before it is killed.
constexpr std::chrono::seconds kStopGrace{10};

constexpr std::string_view kSocketName = "the connection keeper's socket";

// Open inodes per handover message, well within kMaxKeeperMessageBytes.
constexpr int kOpenInodesPerMessage = 1000;

// Refusals of one uid logged one by one each second; the rest are counted.
constexpr int kRefusalsLoggedPerSecond = 5;
// Uids whose refusals are counted apart at a time; the others share a count.
constexpr size_t kMaxRefusedUids = 64;
// The shared count's key: refusals of an unknown uid, or of one beyond
// kMaxRefusedUids.
constexpr uid_t kOtherUids = static_cast<uid_t>(-1);

sockaddr_un AddressOf(std::string_view name, socklen_t* length) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, name.data(), name.size());
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
  return address;
}

bool Send(int socket, const v1::KeeperMessage& message, int passed_fd = -1) {
  absl::Status sent = SendDatagram(socket, message, passed_fd, kSocketName);
  if (!sent.ok()) GRANARY_LOG(WARNING) << "connection keeper: " << sent;
  return sent.ok();
}

// One process at the other end of the keeper's socket.
struct Peer {
  UniqueFd socket;
  pid_t pid = 0;
};

// The connections the keeper refused, logged so that whoever knocks is
// known, without a user knocking in a loop filling the log (the keeper's
// socket name is visible to all in /proc/net/unix): the first
// kRefusalsLoggedPerSecond refusals of a uid in a second are logged one by
// one, and the rest summed up in one line once that second is over. Its
// state is bounded: at most kMaxRefusedUids uids are counted apart.
class RefusalLog {
 public:
  // One refused connection, of `peer` when its credentials could be read.
  void Refused(const absl::StatusOr<SocketPeer>& peer, Clock::time_point now);
  // Sums up the seconds that are over.
  void Flush(Clock::time_point now);
  // When Flush has a sum to log; nullopt when it has none.
  std::optional<Clock::time_point> NextSum() const;

 private:
  struct Second {
    Clock::time_point start;
    int logged = 0;
    uint64_t unlogged = 0;
  };
  std::map<uid_t, Second> seconds_;  // By uid, or kOtherUids.
};

void RefusalLog::Refused(const absl::StatusOr<SocketPeer>& peer, Clock::time_point now) {
  Flush(now);
  uid_t key = peer.ok() ? peer->uid : kOtherUids;
  if (!seconds_.contains(key) && seconds_.size() >= kMaxRefusedUids) key = kOtherUids;
  Second& second = seconds_.try_emplace(key, Second{.start = now}).first->second;
  if (second.logged == kRefusalsLoggedPerSecond) {
    ++second.unlogged;
    return;
  }
  ++second.logged;
  GRANARY_LOG(WARNING) << "connection keeper: refused a takeover by uid "
                       << (peer.ok() ? absl::StrCat(peer->uid) : "?") << " (pid "
                       << (peer.ok() ? absl::StrCat(peer->pid) : "?") << ")";
}

void RefusalLog::Flush(Clock::time_point now) {
  for (auto it = seconds_.begin(); it != seconds_.end();) {
    const Second& second = it->second;
    if (now - second.start < std::chrono::seconds(1)) {
      ++it;
      continue;
    }
    if (second.unlogged > 0) {
      GRANARY_LOG(WARNING) << "connection keeper: refused " << second.unlogged
                           << " more takeovers by "
                           << (it->first == kOtherUids ? std::string("other uids")
                                                       : absl::StrCat("uid ", it->first))
                           << " within a second, not logged one by one";
    }
    it = seconds_.erase(it);
  }
}

std::optional<Clock::time_point> RefusalLog::NextSum() const {
  std::optional<Clock::time_point> next;
  for (const auto& [uid, second] : seconds_) {
    const Clock::time_point due = second.start + std::chrono::seconds(1);
    if (second.unlogged > 0 && (!next || due < *next)) next = due;
  }
  return next;
}

class Keeper {
 public:
  Keeper(const KeeperOptions& options, UniqueFd listener, UniqueFd first_server)
      : options_(options), listener_(std::move(listener)) {
    server_.socket = std::move(first_server);
    server_.pid = getppid();
  }

  // Serves until the mount ends; returns the exit code.
  int Run();

 private:
  // Handles one message of the current server; false once it is gone.
  bool FromServer();
  void ServerGone();
  // Handles one message of the process asking to take over; false to drop it.
  bool FromCandidate();
  void HandOver();
  void Accept();
  void ForgetBackingIds();
  void Count(uint64_t inode, int32_t backing_id, bool released);
  // Counts what the server's open journal holds.
  void DrainOpenJournal();
  v1::Handover State() const;
  int Timeout() const;

  const KeeperOptions options_;
  UniqueFd listener_;
  UniqueFd fuse_fd_;
  std::string init_request_;
  std::map<uint32_t, v1::MountSlot> slots_;
  uint32_t next_slot_ = 0;
  std::set<int32_t> backing_ids_;  // Registered by servers, not forgotten.
  // Opens of an inode not yet released. Counts may go below zero for a while:
  // a release can be counted before its open (one came as a message, the
  // other through the open journal).
  struct OpenCounts {
    int64_t passthrough = 0;
    int64_t cached = 0;
    int32_t backing_id = 0;
  };
  std::map<uint64_t, OpenCounts> open_inodes_;
  std::unique_ptr<OpenJournalReader> open_journal_;  // The current server's.
  uint32_t generation_ = 1;                          // The current (or last) server's.
  Peer server_;
  Peer candidate_;
  bool stopping_server_ = false;  // The candidate waits for the server to go.
  std::optional<Clock::time_point> orphaned_since_;
  Clock::time_point stop_sent_at_{};
  // The mount as the first server attached it: the one mount an orphan
  // timeout detaches, wherever the mount point's path leads by then.
  absl::StatusOr<MountIdentity> mount_ =
      absl::FailedPreconditionError("no granary-fuse attached a mounted connection");
  RefusalLog refusals_;
};

int Keeper::Timeout() const {
  Clock::time_point deadline = Clock::time_point::max();
  if (orphaned_since_) deadline = *orphaned_since_ + options_.orphan_timeout;
  if (stopping_server_) deadline = std::min(deadline, stop_sent_at_ + kStopGrace);
  if (std::optional<Clock::time_point> sum = refusals_.NextSum()) {
    deadline = std::min(deadline, *sum);
  }
  if (deadline == Clock::time_point::max()) return -1;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, 60'000));
}

int Keeper::Run() {
  while (true) {
    // The connection is watched for its end only while no server serves it:
    // a waiter on /dev/fuse is woken by every request the kernel queues,
    // which would cost a wake-up of this process per request. A server sees
    // the end itself and says it unmounts, or dies, and then this process
    // watches.
    pollfd fds[4] = {
        {server_.socket.valid() ? -1 : fuse_fd_.get(), 0, 0},
        {listener_.get(), static_cast<int16_t>(candidate_.socket.valid() ? 0 : POLLIN), 0},
        {server_.socket.get(), POLLIN, 0},
        {candidate_.socket.get(), POLLIN, 0}};
    const int ready = ::poll(fds, 4, Timeout());
    if (ready < 0 && errno != EINTR) {
      GRANARY_LOG(ERROR) << "connection keeper: poll: " << std::strerror(errno);
      return 1;
    }
    // POLLERR on the connection: the mount was unmounted, or aborted.
    if ((fds[0].revents & (POLLERR | POLLHUP)) != 0) {
      GRANARY_LOG(INFO) << "connection keeper: " << options_.mountpoint << " is unmounted";
      return 0;
    }
    if (fds[2].revents != 0 && !FromServer()) {
      if (!fuse_fd_.valid()) return 1;  // The first server died before it mounted.
      ServerGone();
    }
    if (fds[3].revents != 0 && !FromCandidate()) candidate_ = {};
    if (fds[1].revents != 0) Accept();
    refusals_.Flush(Clock::now());
    if (stopping_server_ && server_.socket.valid() && Clock::now() - stop_sent_at_ >= kStopGrace) {
      GRANARY_LOG(WARNING) << "connection keeper: granary-fuse " << server_.pid
                           << " did not stop; killing it";
      ::kill(server_.pid, SIGKILL);
      stop_sent_at_ = Clock::now();
    }
    if (stopping_server_ && !server_.socket.valid()) HandOver();
    if (orphaned_since_ && Clock::now() - *orphaned_since_ >= options_.orphan_timeout) {
      GRANARY_LOG(WARNING) << "connection keeper: no granary-fuse took " << options_.mountpoint
                           << " over within " << options_.orphan_timeout.count()
                           << " s of the last one's end; detaching the mount";
      absl::Status detached =
          mount_.ok() ? DetachMount(options_.mountpoint, *mount_) : mount_.status();
      if (!detached.ok()) GRANARY_LOG(WARNING) << "connection keeper: " << detached;
      return 1;
    }
  }
}

bool Keeper::FromServer() {
  v1::KeeperMessage message;
  int passed = -1;
  absl::Status received =
      ReceiveDatagram(server_.socket.get(), &message, kMaxKeeperMessageBytes, &passed, kSocketName);
  UniqueFd passed_fd(passed);
  if (!received.ok()) return false;
  switch (message.kind_case()) {
    case v1::KeeperMessage::kAttach:
      if (fuse_fd_.valid()) break;
      fuse_fd_ = std::move(passed_fd);
      mount_ = IdentifyMount(options_.mountpoint);
      if (!mount_.ok()) {
        GRANARY_LOG(WARNING) << "connection keeper: " << mount_.status()
                             << "; the mount will not be detached if no granary-fuse serves it";
      }
      break;
    case v1::KeeperMessage::kInit:
      if (init_request_.empty()) init_request_ = message.init().request();
      break;
    case v1::KeeperMessage::kSlotAdded:
      slots_[message.slot_added().slot()] = message.slot_added();
      next_slot_ = std::max(next_slot_, message.slot_added().slot() + 1);
      break;
    case v1::KeeperMessage::kSlotReleased:
      slots_.erase(message.slot_released());
      break;
    case v1::KeeperMessage::kBackingOpened:
      backing_ids_.insert(message.backing_opened());
      break;
    case v1::KeeperMessage::kBackingClosed:
      backing_ids_.erase(message.backing_closed());
      break;
    case v1::KeeperMessage::kOpens:
      for (const v1::InodeOpen& change : message.opens().changes()) {
        Count(change.inode(), change.backing_id(), change.released());
      }
      break;
    case v1::KeeperMessage::kOpenJournal: {
      absl::StatusOr<std::unique_ptr<OpenJournalReader>> journal =
          OpenJournalReader::Map(passed_fd.get());
      if (!journal.ok()) {
        GRANARY_LOG(WARNING) << "connection keeper: refused an open journal: " << journal.status();
        break;
      }
      DrainOpenJournal();
      open_journal_ = *std::move(journal);
      v1::KeeperMessage taken;
      taken.mutable_open_journal_taken();
      Send(server_.socket.get(), taken);
      break;
    }
    case v1::KeeperMessage::kDrainOpens:
      DrainOpenJournal();
      break;
    case v1::KeeperMessage::kUnmounting:
      GRANARY_LOG(INFO) << "connection keeper: " << options_.mountpoint << " is being unmounted";
      std::fflush(nullptr);
      ::_exit(0);
    default:
      break;  // From a newer release; nothing to keep.
  }
  return true;
}

void Keeper::ServerGone() {
  GRANARY_LOG(INFO) << "connection keeper: granary-fuse " << server_.pid << " is gone; "
                    << options_.mountpoint << " waits for the next one";
  server_ = {};
  // Every message of the server's was counted; now what it left in memory.
  DrainOpenJournal();
  open_journal_.reset();
  ForgetBackingIds();
  if (!stopping_server_) orphaned_since_ = Clock::now();
}

// Backing ids keep the cache's files referenced by the kernel until they are
// forgotten; only the server that registered them knew them, so once it is
// gone they are forgotten here, but for those of inodes still open in
// passthrough mode: the next server answers their opens with them. Files
// open with a forgotten id keep their backing file.
void Keeper::ForgetBackingIds() {
  std::set<int32_t> in_use;
  for (const auto& [inode, open] : open_inodes_) {
    if (open.passthrough > 0) in_use.insert(open.backing_id);
  }
  for (auto it = backing_ids_.begin(); it != backing_ids_.end();) {
    if (in_use.contains(*it)) {
      ++it;
      continue;
    }
    KernelChannel::ForgetBacking(fuse_fd_.get(), *it);
    it = backing_ids_.erase(it);
  }
}

void Keeper::Count(uint64_t inode, int32_t backing_id, bool released) {
  OpenCounts& open = open_inodes_[inode];
  const int step = released ? -1 : 1;
  if (backing_id > 0) {
    open.passthrough += step;
    open.backing_id = backing_id;
  } else {
    open.cached += step;
  }
  if (open.passthrough == 0 && open.cached == 0) open_inodes_.erase(inode);
}

void Keeper::DrainOpenJournal() {
  if (open_journal_ == nullptr) return;
  open_journal_->Drain([this](const OpenRecord& record) {
    Count(record.inode, record.backing_id, record.released != 0);
  });
}

void Keeper::Accept() {
  UniqueFd connection(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!connection.valid()) return;
  absl::StatusOr<SocketPeer> peer = PeerOf(connection.get());
  if (!peer.ok() || peer->uid != ::geteuid()) {
    v1::KeeperMessage refused;
    refused.set_refused(absl::StrCat("the keeper of ", options_.mountpoint,
                                     " hands it over only to processes of uid ", ::geteuid()));
    // A peer gone before the refusal reached it is no news to log.
    SendDatagram(connection.get(), refused, -1, kSocketName).IgnoreError();
    refusals_.Refused(peer, Clock::now());
    return;
  }
  candidate_ = {std::move(connection), peer->pid};
}

v1::Handover Keeper::State() const {
  v1::Handover state;
  state.set_generation(generation_ + 1);
  state.set_init_request(init_request_);
  for (const auto& [slot, entry] : slots_) *state.add_slots() = entry;
  state.set_next_slot(next_slot_);
  return state;
}

bool Keeper::FromCandidate() {
  v1::KeeperMessage message;
  int passed = -1;
  absl::Status received = ReceiveDatagram(candidate_.socket.get(), &message, kMaxKeeperMessageBytes,
                                          &passed, kSocketName);
  UniqueFd ignored(passed);
  if (!received.ok() || !message.has_take_over()) {
    stopping_server_ = false;
    if (!server_.socket.valid() && !orphaned_since_) orphaned_since_ = Clock::now();
    return false;
  }
  if (!fuse_fd_.valid()) {
    v1::KeeperMessage refused;
    refused.set_refused(absl::StrCat(options_.mountpoint, " is not mounted yet"));
    Send(candidate_.socket.get(), refused);
    return false;
  }
  if (server_.socket.valid() && !message.take_over().replace_running()) {
    v1::KeeperMessage busy;
    busy.mutable_busy()->set_pid(server_.pid);
    Send(candidate_.socket.get(), busy);
    return false;
  }
  if (message.take_over().preview()) {
    v1::KeeperMessage preview;
    *preview.mutable_handover() = State();
    return Send(candidate_.socket.get(), preview);
  }
  if (server_.socket.valid()) {
    GRANARY_LOG(INFO) << "connection keeper: granary-fuse " << candidate_.pid << " takes "
                      << options_.mountpoint << " over from " << server_.pid;
    v1::KeeperMessage stop;
    stop.mutable_stop();
    Send(server_.socket.get(), stop);
    stopping_server_ = true;
    stop_sent_at_ = Clock::now();
    return true;
  }
  stopping_server_ = true;  // Nothing to wait for: handed over below.
  return true;
}

void Keeper::HandOver() {
  stopping_server_ = false;
  v1::KeeperMessage handover;
  *handover.mutable_handover() = State();
  auto open = open_inodes_.begin();
  bool sent = true;
  for (int passed_fd = fuse_fd_.get(); sent; passed_fd = -1) {
    v1::Handover* part = handover.mutable_handover();
    for (; open != open_inodes_.end() && part->open_inodes_size() < kOpenInodesPerMessage; ++open) {
      const OpenCounts& counts = open->second;
      if (counts.passthrough <= 0 && counts.cached <= 0) continue;
      v1::OpenInode* handed = part->add_open_inodes();
      handed->set_inode(open->first);
      handed->set_passthrough_opens(
          static_cast<uint32_t>(std::max<int64_t>(0, counts.passthrough)));
      handed->set_cached_opens(static_cast<uint32_t>(std::max<int64_t>(0, counts.cached)));
      handed->set_backing_id(counts.backing_id);
    }
    part->set_more(open != open_inodes_.end());
    sent = Send(candidate_.socket.get(), handover, passed_fd);
    if (!part->more()) break;
    handover.Clear();
  }
  if (!sent) {
    candidate_ = {};
    if (!orphaned_since_) orphaned_since_ = Clock::now();
    return;
  }
  ++generation_;
  if (generation_ > 0xffff) generation_ = 1;
  GRANARY_LOG(INFO) << "connection keeper: handed " << options_.mountpoint << " to granary-fuse "
                    << candidate_.pid << " (generation " << generation_ << ")";
  server_ = std::move(candidate_);
  candidate_ = {};
  orphaned_since_.reset();
}

}  // namespace

std::string KeeperSocketName(std::string_view mountpoint) {
  return absl::StrFormat("%cgranary-fuse/%016x", '\0', Xxh3(mountpoint));
}

absl::StatusOr<UniqueFd> ConnectToKeeper(std::string_view mountpoint) {
  UniqueFd socket(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!socket.valid()) return ErrnoStatus(errno, "connection keeper socket");
  socklen_t length;
  sockaddr_un address = AddressOf(KeeperSocketName(mountpoint), &length);
  if (::connect(socket.get(), reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    if (errno == ECONNREFUSED || errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("no connection keeper holds ", AsAbsl(mountpoint)));
    }
    return ErrnoStatus(errno, "connecting to the connection keeper");
  }
  // Abstract names belong to whoever binds them first: a keeper of another
  // user is an impostor, never handed a mount nor asked for one.
  GRANARY_ASSIGN_OR_RETURN(SocketPeer keeper, PeerOf(socket.get()));
  if (keeper.uid != ::geteuid()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the connection keeper socket of ", AsAbsl(mountpoint), " is held by uid ", keeper.uid,
        " (pid ", keeper.pid, "), not by this user (uid ", ::geteuid(), "): refusing it"));
  }
  return socket;
}

absl::StatusOr<UniqueFd> StartConnectionKeeper(const KeeperOptions& options) {
  UniqueFd listener(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!listener.valid()) return ErrnoStatus(errno, "connection keeper socket");
  socklen_t length;
  const std::string name = KeeperSocketName(options.mountpoint);
  sockaddr_un address = AddressOf(name, &length);
  if (::bind(listener.get(), reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    if (errno == EADDRINUSE) {
      return absl::AlreadyExistsError(
          absl::StrCat("a connection keeper already holds ", options.mountpoint));
    }
    return ErrnoStatus(errno, "binding the connection keeper's socket");
  }
  if (::listen(listener.get(), 4) != 0) return ErrnoStatus(errno, "listen");
  int link[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, link) != 0) {
    return ErrnoStatus(errno, "socketpair");
  }
  UniqueFd server_end(link[0]);
  UniqueFd keeper_end(link[1]);
  const pid_t child = ::fork();
  if (child < 0) return ErrnoStatus(errno, "fork");
  if (child > 0) return server_end;

  // The keeper: out of the server's session (a terminal's ^C is not for it),
  // with no descriptor of the server's but its own.
  ::setsid();
  ::prctl(PR_SET_NAME, "granary-keeper");
  // The keeper is tiny and its death is the one a mount does not survive:
  // the OOM killer should take anything else first (root may ask for that).
  std::ofstream("/proc/self/oom_score_adj") << "-1000\n";
  server_end = UniqueFd();
  ::signal(SIGHUP, SIG_IGN);
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGPIPE, SIG_IGN);
  RedirectStandardStreams(options.log_file);
  const unsigned low = static_cast<unsigned>(std::min(listener.get(), keeper_end.get()));
  const unsigned high = static_cast<unsigned>(std::max(listener.get(), keeper_end.get()));
  ::close_range(3, low - 1, 0);
  ::close_range(low + 1, high - 1, 0);
  ::close_range(high + 1, ~0u, 0);
  Keeper keeper(options, std::move(listener), std::move(keeper_end));
  const int code = keeper.Run();
  std::fflush(nullptr);
  ::_exit(code);
}

}  // namespace granary::fuse
