// The connection keeper holds a granary-fuse mount's /dev/fuse connection in
// a small process of its own, so that the mount outlives the granary-fuse
// that serves it. The kernel ends a FUSE mount when the last descriptor of its
// connection closes; while the keeper holds one, a granary-fuse that crashed,
// was OOM-killed or is being upgraded leaves the mount waiting rather than
// dead: requests queue in the kernel, and the next granary-fuse on the mount
// point takes the connection over (KeeperLink::TakeOver) and answers them,
// those the dead one had read and not answered included (it asks the kernel
// to send them again). Open files, mmaps and the kernel's cached inodes keep
// their meaning, because what they name (inode numbers: slots of dataset
// versions; file handles: tagged with the server's generation) is journaled
// here and handed to the next server.
//
// The keeper is forked by the first granary-fuse of a mount before it starts
// any thread. It is single-threaded, holds no dataset and reads no request;
// its state is the journal the servers send it: the kernel's INIT request,
// the mount's slots, the inodes open and the mode the kernel holds each in
// (passed through, or read through granary-fuse; counted from the server's
// open journal in shared memory, open_journal.h, which it empties when told
// the ring is half full and when the server is gone), and the backing ids
// registered, which it forgets itself once the server that registered them
// is gone and no open inode uses them, since no one else can. It shows as
// `granary-keeper` in ps and, as root, sets its OOM score to -1000.
// It serves one server at a time on an abstract Unix socket named after the
// mount point, to processes of its own uid only; those it refuses are logged
// a few per uid and second, the rest counted. It ends when the mount is
// gone (unmounted by anyone: a serving server sees that itself and says it
// unmounts, and only while none serves does the keeper watch the connection,
// since every request queued wakes whoever waits on it), or when no server
// has taken the mount over `orphan_timeout` after the last one died: then it
// detaches the mount, and waiting readers get ENOTCONN. It detaches the mount
// it was handed and no other: the one found at the mount point, reached
// without symlinks, when the first server attached it (detach_mount.h).
//
// Thread-safety: StartConnectionKeeper() must run before the calling process
// starts any thread (it forks).
#ifndef GRANARY_FUSE_CLIENT_RESTARTS_CONNECTION_KEEPER_H_
#define GRANARY_FUSE_CLIENT_RESTARTS_CONNECTION_KEEPER_H_

#include <chrono>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/base/unique_fd.h"

namespace granary::fuse {

// Largest message on the keeper's socket.
inline constexpr size_t kMaxKeeperMessageBytes = 64 << 10;

// The abstract socket address (leading NUL included) of the keeper of the
// mount at `mountpoint`, an absolute path without symlinks.
std::string KeeperSocketName(std::string_view mountpoint);

struct KeeperOptions {
  std::string mountpoint;
  std::chrono::seconds orphan_timeout{300};
  // Where the keeper logs: empty keeps the caller's stderr.
  std::string log_file;
};

// Claims the keeper socket of `options.mountpoint` and forks the keeper.
// Returns the caller's end of its link to the keeper (a connected
// SOCK_SEQPACKET socket). ALREADY_EXISTS when a keeper holds the socket.
absl::StatusOr<UniqueFd> StartConnectionKeeper(const KeeperOptions& options);

// A socket connected to the keeper of `mountpoint`; NOT_FOUND when no keeper
// holds it.
absl::StatusOr<UniqueFd> ConnectToKeeper(std::string_view mountpoint);

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_RESTARTS_CONNECTION_KEEPER_H_
