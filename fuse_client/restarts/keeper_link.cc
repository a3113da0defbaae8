#include "fuse_client/restarts/keeper_link.h"

#include <sys/socket.h>

#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/net/datagram_socket.h"
#include "fuse_client/kernel/mount_device.h"
#include "fuse_client/restarts/connection_keeper.h"

namespace granary::fuse {
namespace {

constexpr std::string_view kSocketName = "the connection keeper's socket";

// Records in the open journal (1 MiB): the keeper is told to drain it at
// half of that, once per 32,768 opens and releases.
constexpr size_t kOpenJournalRecords = 65536;

}  // namespace

absl::StatusOr<std::unique_ptr<KeeperLink>> KeeperLink::Connect(const std::string& mountpoint) {
  GRANARY_ASSIGN_OR_RETURN(UniqueFd socket, ConnectToKeeper(mountpoint));
  return std::make_unique<KeeperLink>(std::move(socket), mountpoint);
}

KeeperLink::~KeeperLink() {
  ::shutdown(socket_.get(), SHUT_RDWR);
  if (watcher_.joinable()) watcher_.join();
}

absl::Status KeeperLink::Attach(int fuse_fd) {
  v1::KeeperMessage message;
  message.mutable_attach();
  MutexLock lock(&send_mutex_);
  return SendDatagram(socket_.get(), message, fuse_fd, kSocketName);
}

absl::StatusOr<v1::KeeperMessage> KeeperLink::Ask(bool replace_running, bool preview,
                                                  UniqueFd* fuse_fd) {
  v1::KeeperMessage request;
  request.mutable_take_over()->set_replace_running(replace_running);
  request.mutable_take_over()->set_preview(preview);
  {
    MutexLock lock(&send_mutex_);
    GRANARY_RETURN_IF_ERROR(SendDatagram(socket_.get(), request, -1, kSocketName));
  }
  v1::KeeperMessage answer;
  int passed = -1;
  absl::Status received =
      ReceiveDatagram(socket_.get(), &answer, kMaxKeeperMessageBytes, &passed, kSocketName);
  *fuse_fd = UniqueFd(passed);
  if (!received.ok()) {
    return absl::UnavailableError(absl::StrCat("the connection keeper of ", mountpoint_,
                                               " did not answer: ", received.message()));
  }
  switch (answer.kind_case()) {
    case v1::KeeperMessage::kHandover:
      return answer;
    case v1::KeeperMessage::kBusy:
      return absl::FailedPreconditionError(absl::StrCat(mountpoint_, " is served by granary-fuse ",
                                                        answer.busy().pid(),
                                                        "; --takeover replaces it"));
    case v1::KeeperMessage::kRefused:
      return absl::PermissionDeniedError(answer.refused());
    default:
      return absl::InternalError(absl::StrCat("the connection keeper of ", mountpoint_,
                                              " answered a takeover with message ",
                                              answer.kind_case()));
  }
}

absl::StatusOr<v1::Handover> KeeperLink::Preview(bool replace_running) {
  UniqueFd none;
  GRANARY_ASSIGN_OR_RETURN(v1::KeeperMessage answer, Ask(replace_running, true, &none));
  return std::move(*answer.mutable_handover());
}

absl::StatusOr<KeeperLink::Handover> KeeperLink::TakeOver(bool replace_running) {
  Handover handover;
  GRANARY_ASSIGN_OR_RETURN(v1::KeeperMessage answer,
                           Ask(replace_running, false, &handover.fuse_fd));
  if (!handover.fuse_fd.valid()) {
    return absl::InternalError(absl::StrCat("the connection keeper of ", mountpoint_,
                                            " handed the mount over without its connection"));
  }
  handover.state = std::move(*answer.mutable_handover());
  while (handover.state.more()) {
    v1::KeeperMessage part;
    int passed = -1;
    GRANARY_RETURN_IF_ERROR(
        ReceiveDatagram(socket_.get(), &part, kMaxKeeperMessageBytes, &passed, kSocketName));
    UniqueFd ignored(passed);
    if (!part.has_handover()) {
      return absl::InternalError(absl::StrCat("the connection keeper of ", mountpoint_,
                                              " broke off handing the mount over"));
    }
    for (v1::OpenInode& open : *part.mutable_handover()->mutable_open_inodes()) {
      *handover.state.add_open_inodes() = std::move(open);
    }
    handover.state.set_more(part.handover().more());
  }
  return handover;
}

void KeeperLink::Journal(const v1::KeeperMessage& message) {
  absl::Status sent;
  {
    MutexLock lock(&send_mutex_);
    sent = SendDatagram(socket_.get(), message, -1, kSocketName);
  }
  if (sent.ok() || journal_failed_.exchange(true)) return;
  if (mount_device_known_.load(std::memory_order_acquire) &&
      MountDevice(mountpoint_) != mount_device_) {
    GRANARY_LOG(INFO) << mountpoint_ << " is unmounted; its connection keeper ended with it";
    return;
  }
  GRANARY_LOG(ERROR) << "the connection keeper of " << mountpoint_ << " is gone (" << sent
                     << "): the mount will not outlive this process";
}

void KeeperLink::OfferOpenJournal() {
  absl::StatusOr<std::unique_ptr<OpenJournalWriter>> journal =
      OpenJournalWriter::Create(kOpenJournalRecords);
  if (!journal.ok()) {
    GRANARY_LOG(WARNING) << "opens are journaled as messages: " << journal.status();
    return;
  }
  open_journal_ = *std::move(journal);
  v1::KeeperMessage message;
  message.mutable_open_journal();
  MutexLock lock(&send_mutex_);
  absl::Status sent = SendDatagram(socket_.get(), message, open_journal_->fd(), kSocketName);
  if (!sent.ok()) GRANARY_LOG(WARNING) << "opens are journaled as messages: " << sent;
}

void KeeperLink::DrainOpenJournal() {
  v1::KeeperMessage drain;
  drain.mutable_drain_opens();
  Journal(drain);
}

void KeeperLink::JournalOpen(uint64_t inode, int32_t backing_id, bool released) {
  if (open_journal_taken_.load(std::memory_order_acquire)) {
    switch (open_journal_->Append({inode, backing_id, released ? 1u : 0u})) {
      case OpenJournalWriter::Appended::kYes:
        return;
      case OpenJournalWriter::Appended::kHalfFull:
        DrainOpenJournal();
        return;
      case OpenJournalWriter::Appended::kFull:
        // Told at half full, the keeper has not caught up: told again, and
        // this change goes as a message.
        DrainOpenJournal();
        break;
    }
  }
  v1::KeeperMessage message;
  v1::InodeOpen* change = message.mutable_opens()->add_changes();
  change->set_inode(inode);
  change->set_backing_id(backing_id);
  change->set_released(released);
  Journal(message);
}

void KeeperLink::Opened(uint64_t inode, int32_t backing_id) {
  JournalOpen(inode, backing_id, false);
}

void KeeperLink::Released(uint64_t inode, int32_t backing_id) {
  JournalOpen(inode, backing_id, true);
}

void KeeperLink::InitAnswered(std::string_view request) {
  v1::KeeperMessage message;
  message.mutable_init()->set_request(request.data(), request.size());
  Journal(message);
}

void KeeperLink::SlotAdded(uint32_t slot, std::string_view dataset, uint64_t version) {
  v1::KeeperMessage message;
  v1::MountSlot* added = message.mutable_slot_added();
  added->set_slot(slot);
  added->set_dataset(dataset.data(), dataset.size());
  added->set_version(version);
  Journal(message);
}

void KeeperLink::SlotReleased(uint32_t slot) {
  v1::KeeperMessage message;
  message.set_slot_released(slot);
  Journal(message);
}

void KeeperLink::BackingOpened(int32_t id) {
  v1::KeeperMessage message;
  message.set_backing_opened(id);
  Journal(message);
}

void KeeperLink::BackingClosed(int32_t id) {
  v1::KeeperMessage message;
  message.set_backing_closed(id);
  Journal(message);
}

void KeeperLink::Unmounting() {
  v1::KeeperMessage message;
  message.mutable_unmounting();
  Journal(message);
}

void KeeperLink::WatchForStop(std::function<void()> on_stop) {
  if (std::optional<std::string> device = MountDevice(mountpoint_)) {
    mount_device_ = *device;
    mount_device_known_.store(true, std::memory_order_release);
  }
  watcher_ = std::thread([this, on_stop = std::move(on_stop)] {
    while (true) {
      v1::KeeperMessage message;
      int passed = -1;
      absl::Status received =
          ReceiveDatagram(socket_.get(), &message, kMaxKeeperMessageBytes, &passed, kSocketName);
      UniqueFd ignored(passed);
      if (!received.ok()) return;
      if (message.has_open_journal_taken() && open_journal_ != nullptr) {
        open_journal_taken_.store(true, std::memory_order_release);
      }
      if (message.has_stop()) {
        on_stop();
        return;
      }
    }
  });
}

}  // namespace granary::fuse
