// KeeperLink is a granary-fuse server's side of its connection keeper
// (connection_keeper.h): how the first server of a mount hands the keeper its
// /dev/fuse descriptor, how a later one takes the mount over, and the journal
// every server keeps there of what a successor needs to mean what it meant
// (the kernel's INIT, the mount's slots, its backing ids).
//
// A journal entry that cannot be sent (the keeper was killed) is logged once
// and dropped: the mount goes on, but will not survive this server. A keeper
// that ended with the mount (an unmount) is not an error, and is logged as
// what it is.
//
// Thread-safety: the journal methods may be called concurrently from any
// thread; Attach(), Preview() and TakeOver() come before WatchForStop().
#ifndef GRANARY_FUSE_CLIENT_RESTARTS_KEEPER_LINK_H_
#define GRANARY_FUSE_CLIENT_RESTARTS_KEEPER_LINK_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/statusor.h"
#include "common/base/mutex.h"
#include "common/base/unique_fd.h"
#include "fuse_client/operations/inode_table.h"
#include "fuse_client/restarts/open_journal.h"
#include "proto/connection_keeper.pb.h"

namespace granary::fuse {

class KeeperLink : public SlotJournal {
 public:
  // A link over `socket`, connected to the keeper of `mountpoint`.
  KeeperLink(UniqueFd socket, std::string mountpoint)
      : socket_(std::move(socket)), mountpoint_(std::move(mountpoint)) {}
  // The link to the keeper holding `mountpoint`'s connection; NOT_FOUND when
  // none does.
  static absl::StatusOr<std::unique_ptr<KeeperLink>> Connect(const std::string& mountpoint);
  ~KeeperLink() override;
  KeeperLink(const KeeperLink&) = delete;
  KeeperLink& operator=(const KeeperLink&) = delete;

  // The first server: hands the keeper the mounted connection.
  absl::Status Attach(int fuse_fd);

  // A later server: the state the mount would be handed over with now, to
  // load what it names before the mount waits on it. FAILED_PRECONDITION
  // naming the pid when a server runs and `replace_running` is false;
  // PERMISSION_DENIED when the keeper refuses this process.
  absl::StatusOr<v1::Handover> Preview(bool replace_running);
  // Takes the mount over: the keeper stops the running server, if any, and
  // hands its connection over with the state as it is then. Errors as
  // Preview's.
  struct Handover {
    v1::Handover state;
    UniqueFd fuse_fd;
  };
  absl::StatusOr<Handover> TakeOver(bool replace_running);

  // The journal.
  void InitAnswered(std::string_view request);
  void SlotAdded(uint32_t slot, std::string_view dataset, uint64_t version) override;
  void SlotReleased(uint32_t slot) override;
  void BackingOpened(int32_t id);
  void BackingClosed(int32_t id);
  // An open of `inode` answered with `backing_id` (0: read through
  // granary-fuse), journaled before the kernel has the answer, and its
  // release: in the open journal once the keeper took it, else (or when it
  // is full) as a message.
  void Opened(uint64_t inode, int32_t backing_id);
  void Released(uint64_t inode, int32_t backing_id);
  // Offers the keeper an open journal (open_journal.h), which it takes unless
  // it is of a release before them; opens go there once it answers.
  void OfferOpenJournal();
  // The server unmounts: the keeper ends without waiting for a successor.
  void Unmounting();

  // Watches the keeper's messages from a thread of the link: calls `on_stop`
  // when the keeper asks this server to stop because another takes the mount
  // over. Called once the mount is this server's (mounted or taken over).
  void WatchForStop(std::function<void()> on_stop);

 private:
  void Journal(const v1::KeeperMessage& message);
  void JournalOpen(uint64_t inode, int32_t backing_id, bool released);
  // Tells the keeper to take what the open journal holds.
  void DrainOpenJournal();
  absl::StatusOr<v1::KeeperMessage> Ask(bool replace_running, bool preview, UniqueFd* fuse_fd);

  UniqueFd socket_;
  const std::string mountpoint_;
  // Held while a message is sent, so that messages from several threads
  // reach the keeper one after the other (it guards the socket, not a field).
  Mutex send_mutex_;
  std::atomic<bool> journal_failed_{false};
  // The mount's device (MountDevice), once the mount is this server's
  // (WatchForStop): when the mount point no longer has it, the mount is gone
  // and so is its keeper.
  std::string mount_device_;
  std::atomic<bool> mount_device_known_{false};
  std::unique_ptr<OpenJournalWriter> open_journal_;
  std::atomic<bool> open_journal_taken_{false};
  std::thread watcher_;
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_RESTARTS_KEEPER_LINK_H_
