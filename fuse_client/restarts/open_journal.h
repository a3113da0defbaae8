// OpenJournal is where a granary-fuse server journals its opens and releases
// for its connection keeper (connection_keeper.h) without a message per open:
// a ring of fixed-size records in shared memory (a memfd both processes map).
// A message wakes the keeper, and on a small machine a wake-up per open and
// per release costs about as much as answering the open; a record in shared
// memory costs a few stores. What the server wrote before it answered the
// kernel is in the keeper's memory even if the server dies the next moment,
// so the ring is as good a journal as the socket.
//
// The server appends; the keeper takes the records (Drain) when the server
// says the ring is half full and, all that is left, when the server is gone.
// A full ring refuses a record, which the server then sends as a message:
// the keeper counts opens and releases so that their order does not matter.
//
// The keeper trusts nothing in the ring but its own mapping: the capacity is
// what the memfd's size allows, and indices that say more than a ring's
// worth was appended are cut to the newest ring's worth.
//
// Thread-safety: OpenJournalWriter::Append may be called concurrently (it
// locks); OpenJournalReader is single-threaded, as the keeper is. One writer
// and one reader share a ring.
#ifndef GRANARY_FUSE_CLIENT_RESTARTS_OPEN_JOURNAL_H_
#define GRANARY_FUSE_CLIENT_RESTARTS_OPEN_JOURNAL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "common/base/mutex.h"
#include "common/base/unique_fd.h"

namespace granary::fuse {

// One open (or, with `released`, its release) of `inode`, answered with
// `backing_id` (0: read through granary-fuse).
struct OpenRecord {
  uint64_t inode = 0;
  int32_t backing_id = 0;
  uint32_t released = 0;
};

// A mapping of a ring; unmapped when destroyed.
class OpenRing;

class OpenJournalWriter {
 public:
  // A new ring of `capacity` records (a power of two); `fd()` is its memfd,
  // for the keeper.
  static absl::StatusOr<std::unique_ptr<OpenJournalWriter>> Create(size_t capacity);
  ~OpenJournalWriter();
  OpenJournalWriter(const OpenJournalWriter&) = delete;
  OpenJournalWriter& operator=(const OpenJournalWriter&) = delete;

  int fd() const { return fd_.get(); }

  enum class Appended {
    kYes,
    kHalfFull,  // Appended, and now the ring is half full: time to tell the keeper.
    kFull,      // Not appended.
  };
  Appended Append(const OpenRecord& record);

 private:
  OpenJournalWriter(UniqueFd fd, std::unique_ptr<OpenRing> ring);

  UniqueFd fd_;
  const std::unique_ptr<OpenRing> ring_;
  // Held by Append(): the ring has one writer at a time (the keeper reads
  // it from another process, through the ring's atomics).
  Mutex mutex_;
};

class OpenJournalReader {
 public:
  // Maps the ring of memfd `fd`. INVALID_ARGUMENT when it is too small to be one.
  static absl::StatusOr<std::unique_ptr<OpenJournalReader>> Map(int fd);
  ~OpenJournalReader();
  OpenJournalReader(const OpenJournalReader&) = delete;
  OpenJournalReader& operator=(const OpenJournalReader&) = delete;

  // Calls `take` with each record appended since the last Drain, oldest
  // first, and frees their room.
  void Drain(const std::function<void(const OpenRecord&)>& take);

 private:
  explicit OpenJournalReader(std::unique_ptr<OpenRing> ring);

  const std::unique_ptr<OpenRing> ring_;
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_RESTARTS_OPEN_JOURNAL_H_
