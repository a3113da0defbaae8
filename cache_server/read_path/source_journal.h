// SourceJournal is granaryd's account of the load it puts on datasets'
// sources, for whoever must explain it: every range it read from a source,
// and what its store came to hold and stopped holding (store_events.h), so
// that a byte read twice can be told apart from a byte read again because
// the cache had lost it (evicted, declined, damaged, never stored).
//
// The journal is a file the administrator names (config `source_journal`,
// flag --source-journal), appended to, one JSON object a line, each with
// "t" (seconds since 1970, to the microsecond) and "event":
//   {"event":"source_read","dataset":"images","version":"<16 hex digits>",
//    "file":7,"chunk":0,"offset":0,"length":65536,"for":"reader",
//    "began":<seconds>}             ("for": "reader", or "fill" for a fill's
//                                     or prewarm's read; offsets in the chunk)
//   {"event":"kept","version":...,"file":7,"chunk":0,"offset":0,"length":4096}
//   {"event":"withdrawn","version":...,"file":7}
// Each line is one write(2) to a file opened O_APPEND, so lines of
// concurrent events never interleave, and a granaryd killed at any moment
// leaves every line it wrote whole. The file is created mode 0640: it names
// datasets and their files. It is never rotated by granaryd (logrotate's
// copytruncate suits it). A write that fails (a full disk) loses that line,
// is logged once, and never fails a read.
//
// Thread-safety: every method may be called concurrently.
#ifndef GRANARY_CACHE_SERVER_READ_PATH_SOURCE_JOURNAL_H_
#define GRANARY_CACHE_SERVER_READ_PATH_SOURCE_JOURNAL_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "cache_server/store/store_events.h"
#include "common/base/unique_fd.h"
#include "common/dataset/chunk_key.h"

namespace granary {

class SourceJournal final : public store::StoreEvents {
 public:
  // Opens `path` (absolute) to append to, creating it. An error names
  // source_journal, the path and what is wrong.
  static absl::StatusOr<std::unique_ptr<SourceJournal>> Open(const std::string& path);

  enum class ReadFor { kReader, kFill };
  // Bytes [offset, offset + length) of chunk `key`, of dataset `dataset`,
  // were read from its source, from `began` until now.
  void SourceRead(std::string_view dataset, const ChunkKey& key, uint64_t offset, uint64_t length,
                  ReadFor read_for, std::chrono::system_clock::time_point began);

  void Kept(const ChunkKey& key, uint64_t offset, uint64_t length) override;
  void Withdrawn(uint64_t dataset_version, uint64_t file_id) override;

 private:
  SourceJournal(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}
  void Append(const std::string& line);

  const std::string path_;
  const UniqueFd fd_;
  std::atomic<bool> write_failed_{false};
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_READ_PATH_SOURCE_JOURNAL_H_
