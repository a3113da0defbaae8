#include "cache_server/read_path/source_turns.h"

#include <limits>

namespace granary {

SourceTurns::Turn::~Turn() {
  if (turns_ == nullptr) return;
  if (reader_) {
    turns_->EndReader();
  } else {
    turns_->EndFill();
  }
}

SourceTurns::Turn SourceTurns::Reader() {
  MutexLock lock(&mu_);
  readers_++;
  return Turn(this, /*reader=*/true, std::numeric_limits<uint64_t>::max());
}

SourceTurns::Turn SourceTurns::Fill() {
  MutexLock lock(&mu_);
  bool waited = false;
  for (;;) {
    const Clock::time_point now = Clock::now();
    if (readers_ == 0 && now - last_reader_end_ >= kReadersAbout) break;
    const Clock::time_point gap_end = last_reader_end_ + kReaderGap;
    if (readers_ == 0 && now >= gap_end) {
      if (fills_ == 0) {
        fills_++;
        return Turn(this, /*reader=*/false, kFillPieceBytes, waited);
      }
      changed_.Wait(&mu_);  // For the fill reads at the source to end.
      continue;
    }
    waited = true;
    if (readers_ > 0) {
      changed_.Wait(&mu_);
    } else {
      changed_.WaitUntil(&mu_, gap_end);
    }
  }
  fills_++;
  return Turn(this, /*reader=*/false, std::numeric_limits<uint64_t>::max());
}

void SourceTurns::EndReader() {
  {
    MutexLock lock(&mu_);
    readers_--;
    last_reader_end_ = Clock::now();
  }
  changed_.SignalAll();
}

void SourceTurns::EndFill() {
  {
    MutexLock lock(&mu_);
    fills_--;
  }
  changed_.SignalAll();
}

}  // namespace granary
