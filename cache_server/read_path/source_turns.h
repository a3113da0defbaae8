// SourceTurns puts readers' reads of the sources before the fill's. The
// device behind a source (a throttled volume, a busy NFS server) serves
// reads in the order they arrive, so a reader's miss that arrives behind a
// fill's chunk reads waits for all of them. Every source read granaryd makes
// takes a turn here first:
//  - a reader's read (a miss, or a miss another node asks this owner to
//    read through) takes its turn at once, always;
//  - a fill's or a prewarm's read waits while a reader's read is at the
//    source or ended less than kReaderGap ago (the time a reader takes to
//    ask again), and while readers are about (a reader's read within
//    kReadersAbout) the fills read one piece of at most kFillPieceBytes at a
//    time, each after a turn of its own: a reader's read then arrives behind
//    at most one fill piece. With no reader about, fills read whole chunks,
//    as many at once as they have workers.
//
// Thread-safety: all methods may be called concurrently.
#ifndef GRANARY_CACHE_SERVER_READ_PATH_SOURCE_TURNS_H_
#define GRANARY_CACHE_SERVER_READ_PATH_SOURCE_TURNS_H_

#include <chrono>
#include <cstdint>
#include <utility>

#include "common/base/mutex.h"

namespace granary {

class SourceTurns {
 public:
  static constexpr std::chrono::microseconds kReaderGap{2000};
  static constexpr std::chrono::milliseconds kReadersAbout{200};
  static constexpr uint64_t kFillPieceBytes = 1 << 20;

  // A read at the source, from its turn until it is destroyed.
  class Turn {
   public:
    Turn(Turn&& other) noexcept
        : turns_(std::exchange(other.turns_, nullptr)),
          reader_(other.reader_),
          max_bytes_(other.max_bytes_),
          waited_for_readers_(other.waited_for_readers_) {}
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;
    Turn& operator=(Turn&&) = delete;
    ~Turn();
    // The most the read may take in this turn.
    uint64_t max_bytes() const { return max_bytes_; }
    // Whether a fill's turn waited for readers' reads.
    bool waited_for_readers() const { return waited_for_readers_; }

   private:
    friend class SourceTurns;
    Turn(SourceTurns* turns, bool reader, uint64_t max_bytes, bool waited_for_readers = false)
        : turns_(turns),
          reader_(reader),
          max_bytes_(max_bytes),
          waited_for_readers_(waited_for_readers) {}
    SourceTurns* turns_;
    bool reader_;
    uint64_t max_bytes_;
    bool waited_for_readers_;
  };

  // A reader's turn: at once, for any length.
  Turn Reader();
  // A fill's turn, once readers leave it one (see the top of this file).
  Turn Fill();

 private:
  using Clock = std::chrono::steady_clock;
  void EndReader();
  void EndFill();

  Mutex mu_;
  CondVar changed_;
  int readers_ ABSL_GUARDED_BY(mu_) = 0;  // Readers' reads at the source.
  int fills_ ABSL_GUARDED_BY(mu_) = 0;    // Fills' reads at the source.
  Clock::time_point last_reader_end_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_READ_PATH_SOURCE_TURNS_H_
