// ChunkIndex is the store's persistent index, a RocksDB database with three
// column families:
//   default:         ChunkKey::Encode() → serialized v1::ChunkLocation
//   segment_chunks:  data file id (8 bytes, big-endian) + encoded key → ""
//                    so a data file's chunks can be dropped without a full
//                    scan (named when data files were called segments)
//   meta:            's' + data file id → ""   the file is synced
//                    'v' + version    → one byte, a VersionState other than
//                                       kInactive (the default) and kHeld
//                                       (written as kActive)
// A chunk's two entries are written and deleted in one atomic batch.
//
// Writes go to RocksDB's write-ahead log without fsync: a killed process
// loses nothing the operating system has, and the store never relies on the
// index surviving a power loss (see chunk_store.cc).
//
// Thread-safety: all methods are safe to call concurrently; callers order
// conflicting updates of one key themselves.
#ifndef GRANARY_CACHE_SERVER_STORE_CHUNK_INDEX_H_
#define GRANARY_CACHE_SERVER_STORE_CHUNK_INDEX_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "cache_server/store/chunk_store.h"
#include "proto/granary.pb.h"

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
}  // namespace rocksdb

namespace granary::store {

class ChunkIndex {
 public:
  // Opens or creates the database at `path`, creating missing directories.
  static absl::StatusOr<std::unique_ptr<ChunkIndex>> Open(const std::string& path);
  ~ChunkIndex();
  ChunkIndex(const ChunkIndex&) = delete;
  ChunkIndex& operator=(const ChunkIndex&) = delete;

  // The location of `key`, nullopt if absent; DATA_LOSS if unparsable.
  absl::StatusOr<std::optional<v1::ChunkLocation>> Get(std::string_view key) const;
  // Puts `key` in its data file (location.data_file_id()); `unmark_synced`
  // drops the file's synced mark in the same write, for a chunk added to a
  // file that was synced before.
  absl::Status Put(std::string_view key, const v1::ChunkLocation& location, bool unmark_synced);
  absl::Status Delete(std::string_view key, uint64_t file_id);

  // Drops every chunk of the data file and its synced mark.
  absl::Status DeleteFile(uint64_t file_id);

  // Every chunk, in key order. Unparsable entries are logged and skipped.
  absl::Status ForEach(
      absl::FunctionRef<void(std::string_view key, const v1::ChunkLocation& location)> visit) const;
  // Every chunk of one dataset version, in key order.
  absl::StatusOr<std::vector<std::pair<std::string, v1::ChunkLocation>>> ChunksOfVersion(
      uint64_t dataset_version) const;

  absl::Status MarkSynced(const std::vector<uint64_t>& file_ids);
  absl::StatusOr<std::set<uint64_t>> SyncedFiles() const;

  absl::Status SetVersionState(uint64_t dataset_version, VersionState state);
  absl::StatusOr<std::map<uint64_t, VersionState>> VersionStates() const;

 private:
  ChunkIndex(std::unique_ptr<rocksdb::DB> db, std::vector<rocksdb::ColumnFamilyHandle*> handles);

  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* chunks_;
  rocksdb::ColumnFamilyHandle* file_chunks_;
  rocksdb::ColumnFamilyHandle* meta_;
};

}  // namespace granary::store

#endif  // GRANARY_CACHE_SERVER_STORE_CHUNK_INDEX_H_
