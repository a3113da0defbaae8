// DataFile is the cache's copy of one source file of one dataset version: the
// file's chunks that the node holds, each at its own offset in the source
// file (chunk i at i × chunk size), so that a file the node holds completely
// is byte for byte the source file and the kernel can serve it itself (FUSE
// passthrough). Chunks the node does not hold are holes.
//
// A data file lives at "<cache directory>/<2 hex digits>/<16 hex digits>.dat",
// named by an id the store assigns; the two-digit folder (the id's low byte)
// keeps directories small when a dataset has millions of files.
//
// A data file is opened with O_DIRECT when asked and the filesystem allows it
// (ramfs, for one, does not: the fallback to buffered I/O is logged once);
// O_DIRECT writes pad a file's last chunk to a whole block, so such a file is
// longer than its source file and is never passed through. A file opened
// buffered may still be written with O_DIRECT through a descriptor of its own
// (OpenForDirectWrites), block by block, leaving it exact.
//
// Its descriptor lives in the store's DescriptorCache, which keeps a bounded
// number open: Descriptor() reopens the file when the cache closed it. A
// holder of a descriptor can finish reading a file that has just been
// unlinked; a file unlinked and closed cannot be reopened (NOT_FOUND), which
// callers treat as a miss.
//
// Thread-safety: a descriptor may be used for concurrent pread/pwrite at
// distinct offsets; all methods are safe to call from any thread.
#ifndef GRANARY_CACHE_SERVER_STORE_DATA_FILE_H_
#define GRANARY_CACHE_SERVER_STORE_DATA_FILE_H_

#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache_server/store/descriptor_cache.h"
#include "common/base/unique_fd.h"

namespace granary::store {

class DataFile {
 public:
  // Creates a new, empty data file; ALREADY_EXISTS if the file exists.
  // `descriptors` outlives the data file.
  static absl::StatusOr<std::unique_ptr<DataFile>> Create(const std::string& directory, uint64_t id,
                                                          bool direct_io,
                                                          DescriptorCache* descriptors);
  // Opens an existing data file for reading, writing and truncation.
  static absl::StatusOr<std::unique_ptr<DataFile>> Open(const std::string& directory, uint64_t id,
                                                        bool direct_io,
                                                        DescriptorCache* descriptors);

  // The subfolders of a cache directory that hold data files.
  static constexpr int kSubdirectories = 256;
  static std::string SubdirectoryName(int index);
  // The path of data file `id` relative to its cache directory.
  static std::string RelativePath(uint64_t id);
  // The id in a data file's name (without its folder), or nullopt for any
  // other name.
  static std::optional<uint64_t> ParseFileName(std::string_view name);

  ~DataFile();
  DataFile(const DataFile&) = delete;
  DataFile& operator=(const DataFile&) = delete;

  uint64_t id() const { return id_; }
  // An open descriptor of the file, valid while the caller holds it.
  absl::StatusOr<SharedFd> Descriptor() const;
  bool direct_io() const { return direct_io_; }
  // A descriptor of the file for O_DIRECT writes; INVALID_ARGUMENT when its
  // filesystem does not support O_DIRECT.
  absl::StatusOr<UniqueFd> OpenForDirectWrites() const;
  const std::string& path() const { return path_; }

  absl::StatusOr<struct stat> Stat() const;
  absl::Status Truncate(uint64_t size);
  // fdatasync: everything written so far survives a power loss.
  absl::Status Sync();
  // syncfs: the same for every file of the filesystem this one lies on.
  absl::Status SyncFilesystem();
  absl::Status Unlink();

 private:
  DataFile(uint64_t id, bool direct_io, std::string path, DescriptorCache* descriptors)
      : id_(id), direct_io_(direct_io), path_(std::move(path)), descriptors_(descriptors) {}

  static absl::StatusOr<std::unique_ptr<DataFile>> OpenWithFlags(const std::string& directory,
                                                                 uint64_t id, int flags,
                                                                 bool direct_io,
                                                                 DescriptorCache* descriptors);
  // The flags a closed descriptor is reopened with.
  int ReopenFlags() const;

  const uint64_t id_;
  const bool direct_io_;
  const std::string path_;
  DescriptorCache* const descriptors_;
};

}  // namespace granary::store

#endif  // GRANARY_CACHE_SERVER_STORE_DATA_FILE_H_
