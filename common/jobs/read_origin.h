// ReadOrigin is where the bytes of a read came from, cheapest first; the
// origins a job's reads are split by (common/jobs/job_reads.h).
//
// ReadOriginScope lets the read path say where bytes came from without
// passing it up through every call: while a scope is alive on a thread,
// NoteReadOrigin() on that thread records the slowest origin noted, which
// the code that opened the scope (granary-fuse's read handler) attributes
// the read to. Outside a scope (readahead threads, tools) a note costs a
// thread-local load and is dropped.
//
// Thread-safety: a scope belongs to the thread that created it; scopes nest,
// an inner one hiding the outer one while it lives.
#ifndef GRANARY_COMMON_JOBS_READ_ORIGIN_H_
#define GRANARY_COMMON_JOBS_READ_ORIGIN_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace granary {

enum class ReadOrigin : uint8_t {
  kMemory = 0,       // granary-fuse's own chunk cache.
  kPassthrough = 1,  // The kernel reads the cache's file itself (counted at open).
  kLocal = 2,        // This node's store.
  kPeer = 3,         // Another member's store.
  kSource = 4,       // The dataset's source, by any node.
};
inline constexpr int kReadOrigins = 5;

// "memory", "passthrough", "local", "peer", "source".
std::string_view ReadOriginName(ReadOrigin origin);

class ReadOriginScope {
 public:
  ReadOriginScope();
  ~ReadOriginScope();
  ReadOriginScope(const ReadOriginScope&) = delete;
  ReadOriginScope& operator=(const ReadOriginScope&) = delete;

  // The slowest origin noted in this scope, if any.
  std::optional<ReadOrigin> slowest() const;

 private:
  friend void NoteReadOrigin(ReadOrigin origin);

  ReadOriginScope* const outer_;
  int slowest_ = -1;
};

// Records that bytes of the current read came from `origin`.
void NoteReadOrigin(ReadOrigin origin);

}  // namespace granary

#endif  // GRANARY_COMMON_JOBS_READ_ORIGIN_H_
