// PassthroughFiles decides at every OPEN whether the kernel serves the file
// itself (FUSE passthrough) or granary-fuse does: the kernel does when the
// local granaryd holds the file whole and verified (its data file is the
// source file byte for byte) and passthrough is on (KernelChannel). A small
// file the local granaryd owns but lacks is read through by it at the open,
// in the same round trip, and then passed through: from an in-memory copy of
// the bytes granaryd read (a sealed memfd), which it stores in the cache
// behind the answer, while the copies open stay within `max_memory_bytes`;
// beyond that, granaryd stores the file before answering and hands out its
// data file. An in-memory copy is never kept: it is let go at the file's
// last release, and a later open finds the file in the cache.
//
// The descriptor granaryd hands out for such a file, and its backing id with
// the kernel, are kept after the file is closed, for up to `max_kept` files
// (least recently opened go first), so that the next open of the file, in
// the next epoch, costs neither a round trip to granaryd nor a registration:
// only an fstat, which shows whether the data file was written since it was
// verified (its ctime) or reclaimed (no link left). Files granaryd withdraws
// are closed as its answers to use reports name them (UseReporter), and
// every kept file is closed when it cannot name them all (after a granaryd
// restart, every file is verified again before it is passed through).
// Opens served from kept files are reported as uses, so that granaryd's
// eviction and hit counts see them.
//
// An open that asks granaryd anyway asks, in the same request, for up to
// kMaxAheadFiles more files of the version (the next ones in the manifest
// that granaryd owns and that are neither open nor kept): those it holds
// whole and verified come back with the answer and are kept as if opened
// before, so that a first epoch over held files (after a prewarm, or after
// a restart of granary-fuse) costs a round trip per 1 + kMaxAheadFiles files,
// not per file. Files withdrawn while such an answer was on its way are not
// kept.
//
// The kernel's rules: every open of an inode open in passthrough mode shares
// its backing file, and an inode open through granary-fuse (cached mode)
// cannot be opened in passthrough mode until those opens are released, nor
// the other way round; Open() follows them. A file withdrawn while open in
// passthrough mode keeps its backing file until its last release.
//
// Thread-safety: every method may be called concurrently; the first open of
// an inode that is not kept asks granaryd without holding the lock, while
// other opens of that inode wait for it and opens of other inodes go on.
#ifndef GRANARY_FUSE_CLIENT_PASSTHROUGH_PASSTHROUGH_FILES_H_
#define GRANARY_FUSE_CLIENT_PASSTHROUGH_PASSTHROUGH_FILES_H_

#include <atomic>
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "common/base/mutex.h"
#include "common/base/unique_fd.h"
#include "common/net/local_read_socket.h"
#include "fuse_client/kernel/kernel_channel.h"
#include "fuse_client/read_path/open_file.h"
#include "fuse_client/read_path/use_reporter.h"
#include "fuse_client/restarts/keeper_link.h"
#include "proto/connection_keeper.pb.h"
#include "proto/granary.pb.h"

namespace granary::fuse {

class PassthroughFiles {
 public:
  // Everything must outlive this object.
  PassthroughFiles(KernelChannel* channel, LocalChunkReader* local, size_t max_kept,
                   uint64_t max_memory_bytes);
  PassthroughFiles(const PassthroughFiles&) = delete;
  PassthroughFiles& operator=(const PassthroughFiles&) = delete;

  void set_use_reporter(UseReporter* uses) { uses_ = uses; }
  // Opens and releases are journaled to `keeper` (KeeperLink::Opened), so
  // that a successor process answers opens in the modes the kernel holds.
  void set_keeper(KeeperLink* keeper) { keeper_ = keeper; }

  // Taking a mount over: the inodes the kernel holds open, in the mode it
  // holds them, from the earlier processes. Opens of them are answered in
  // that mode until ReleaseInherited() has released them all.
  void Inherit(const v1::Handover& state);
  // The release of an open an earlier process answered.
  void ReleaseInherited(uint64_t inode);

  // Whether the local granaryd owns every chunk of file `file_id` (`size`
  // bytes) of the version being opened: only such files are asked of it.
  using OwnedWhole = absl::FunctionRef<bool(uint64_t file_id, uint64_t size)>;

  // At an OPEN of `file`: the backing id to answer with, or 0 to open it
  // through granary-fuse. Either way a Release() must follow.
  int32_t Open(const OpenFile& file, OwnedWhole owned_whole);
  // The release of an open that Open() answered with `backing_id`, or an
  // OPEN reply the kernel did not take.
  void Release(uint64_t inode, int32_t backing_id);

  // UseReporter's answer: the files granaryd withdrew.
  void Withdraw(const v1::WithdrawnFiles& withdrawn);

  // Unregisters every backing file and closes every kept one; after the
  // session loop ends, while the connection is still open. Opens after it
  // are not passed through.
  void Close();

  // Opens passed through, and of those, served from a kept file.
  uint64_t passed_through() const { return passed_through_.load(std::memory_order_relaxed); }
  uint64_t from_kept() const { return from_kept_.load(std::memory_order_relaxed); }

 private:
  using FileKey = std::pair<uint64_t, uint64_t>;  // (dataset version, file id).

  // What is known of one inode that is open or kept. Guarded by mutex_, or
  // while `busy`, by the open that set it.
  struct State {
    int passthrough_opens = 0;
    int cached_opens = 0;
    bool busy = false;  // An open is asking granaryd or the kernel; others wait.
    UniqueFd fd;        // The data file, while kept.
    int64_t verified_ctime_ns = 0;
    int32_t backing_id = 0;     // Registered with the kernel while kept.
    bool withdrawn = false;     // Forget it once its last passthrough open is released.
    uint64_t memory_bytes = 0;  // Of `fd`, an in-memory copy; 0 for a data file.
    FileKey file;
    bool in_lru = false;
    std::list<uint64_t>::iterator lru_position;
  };

  // A file asked for ahead that granaryd answered, checked and registered
  // with the kernel.
  struct Ahead {
    AheadWholeFile held;
    int32_t backing_id = 0;
  };

  int32_t ChooseMode(const OpenFile& file, OwnedWhole owned_whole);
  // The files after `file` in its manifest to ask for ahead of their opens.
  std::vector<AheadFile> AheadOfLocked(const OpenFile& file, OwnedWhole owned_whole)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Those of `answered` still verified, registered with the kernel.
  std::vector<Ahead> RegisterAhead(std::vector<AheadWholeFile> answered);
  // Keeps the files of `ahead` (of `file`'s version) that no open took
  // meanwhile, unless a withdrawal came since `withdrawals` was read; the
  // files `asked` are no longer being asked for.
  void KeepAheadLocked(const OpenFile& file, std::span<const AheadFile> asked,
                       std::vector<Ahead> ahead, uint64_t withdrawals)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void ReleaseLocked(uint64_t inode, State& state, int32_t backing_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  // Whether a kept descriptor still reads what was verified at
  // `verified_ctime_ns`: not written since, not reclaimed.
  static bool StillVerified(int fd, int64_t verified_ctime_ns);
  // Closes the kept file of `state` and unregisters its backing id.
  void DropKeptLocked(State& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // After the last release of `inode`: kept (most recently used first, the
  // least recently used past max_kept closed) or forgotten.
  void IdleLocked(uint64_t inode, State& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void UnkeepLocked(State& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Forgets `inode` now if nothing holds it, else once its opens are released.
  void WithdrawLocked(uint64_t inode, State& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  KernelChannel* const channel_;
  LocalChunkReader* const local_;
  UseReporter* uses_ = nullptr;
  KeeperLink* keeper_ = nullptr;
  const size_t max_kept_;
  const uint64_t max_memory_bytes_;

  Mutex mutex_;
  CondVar idle_;  // A busy state is no longer busy.
  // By inode; node-based, so that a State stays put while an open works on
  // it unlocked.
  std::unordered_map<uint64_t, State> states_ ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_map<FileKey, uint64_t> inodes_ ABSL_GUARDED_BY(mutex_);  // Kept files' inodes.
  // Inodes of kept files with no open, most recent first.
  std::list<uint64_t> lru_ ABSL_GUARDED_BY(mutex_);
  // Inodes of files asked for ahead by an open still waiting for its answer,
  // which other opens do not ask for again.
  absl::flat_hash_set<uint64_t> asked_ahead_ ABSL_GUARDED_BY(mutex_);

  // Of in-memory copies held or being asked for.
  uint64_t memory_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  // Withdraw() calls that named files: an answer that was on its way across
  // one may name a file it withdrew.
  uint64_t withdrawals_ ABSL_GUARDED_BY(mutex_) = 0;
  bool closed_ ABSL_GUARDED_BY(mutex_) = false;
  std::atomic<uint64_t> passed_through_{0};
  std::atomic<uint64_t> from_kept_{0};
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_PASSTHROUGH_PASSTHROUGH_FILES_H_
