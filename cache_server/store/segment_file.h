// SegmentFile is one append-only file of chunks in a cache directory, named
// "segment-<16 hex digits of its id>.dat". Chunks start at block-aligned
// offsets and are zero-padded to whole blocks, so that any chunk can be read
// with O_DIRECT; the store decides where each chunk goes.
//
// A segment is opened with O_DIRECT when asked and the filesystem allows it
// (tmpfs, for one, does not: the fallback to buffered I/O is logged once).
//
// Thread-safety: the descriptor may be used for concurrent pread/pwrite at
// distinct offsets; Truncate/Sync/Unlink are safe to call from any thread.
// The descriptor is closed when the object is destroyed, so holders of a
// shared_ptr can finish reading a segment that has just been unlinked.
#ifndef GRANARY_CACHE_SERVER_STORE_SEGMENT_FILE_H_
#define GRANARY_CACHE_SERVER_STORE_SEGMENT_FILE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace granary::store {

class SegmentFile {
 public:
  // Creates a new, empty segment; ALREADY_EXISTS if the file exists.
  static absl::StatusOr<std::unique_ptr<SegmentFile>> Create(const std::string& directory,
                                                             uint64_t id, bool direct_io);
  // Opens an existing segment for reading and truncation.
  static absl::StatusOr<std::unique_ptr<SegmentFile>> Open(const std::string& directory,
                                                           uint64_t id, bool direct_io);

  static std::string FileName(uint64_t id);
  // The id in a segment file name, or nullopt for any other name.
  static std::optional<uint64_t> ParseFileName(std::string_view name);

  ~SegmentFile();
  SegmentFile(const SegmentFile&) = delete;
  SegmentFile& operator=(const SegmentFile&) = delete;

  uint64_t id() const { return id_; }
  int fd() const { return fd_; }
  bool direct_io() const { return direct_io_; }
  const std::string& path() const { return path_; }

  absl::StatusOr<uint64_t> Size() const;
  absl::Status Truncate(uint64_t size);
  // fdatasync: everything written so far survives a power loss.
  absl::Status Sync();
  absl::Status Unlink();

 private:
  SegmentFile(uint64_t id, int fd, bool direct_io, std::string path)
      : id_(id), fd_(fd), direct_io_(direct_io), path_(std::move(path)) {}

  static absl::StatusOr<std::unique_ptr<SegmentFile>> OpenWithFlags(const std::string& directory,
                                                                    uint64_t id, int flags,
                                                                    bool direct_io);

  const uint64_t id_;
  const int fd_;
  const bool direct_io_;
  const std::string path_;
};

}  // namespace granary::store

#endif  // GRANARY_CACHE_SERVER_STORE_SEGMENT_FILE_H_
