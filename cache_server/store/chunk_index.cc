#include "cache_server/store/chunk_index.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"
#include "common/base/big_endian.h"
#include "common/base/file_util.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/dataset/chunk_key.h"
#include "rocksdb/db.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/table.h"
#include "rocksdb/write_batch.h"

namespace granary::store {
namespace {

// Named when data files were called segments; kept so that indexes written
// then still open.
constexpr char kFileChunksFamily[] = "segment_chunks";
constexpr char kMetaFamily[] = "meta";
constexpr char kSyncedTag = 's';
constexpr char kVersionTag = 'v';

std::string BigEndian64(uint64_t value) {
  std::string out;
  AppendBigEndian(value, 8, &out);
  return out;
}

rocksdb::Slice ToSlice(std::string_view s) { return rocksdb::Slice(s.data(), s.size()); }
std::string_view ToView(const rocksdb::Slice& s) { return std::string_view(s.data(), s.size()); }

absl::Status FromRocks(const rocksdb::Status& status, std::string_view what) {
  if (status.ok()) return absl::OkStatus();
  const std::string message = absl::StrCat("chunk index: ", AsAbsl(what), ": ", status.ToString());
  if (status.IsIOError() && status.subcode() == rocksdb::Status::kNoSpace) {
    return absl::ResourceExhaustedError(message);
  }
  if (status.IsCorruption()) return absl::DataLossError(message);
  if (status.IsIOError()) return absl::UnavailableError(message);
  return absl::InternalError(message);
}

std::string FilePrefix(uint64_t file_id) { return BigEndian64(file_id); }
std::string SyncedKey(uint64_t file_id) { return kSyncedTag + BigEndian64(file_id); }
std::string VersionKey(uint64_t version) { return kVersionTag + BigEndian64(version); }

// Calls `visit` for every entry of `family` whose key starts with `prefix`.
absl::Status ScanPrefix(rocksdb::DB& db, rocksdb::ColumnFamilyHandle* family,
                        std::string_view prefix,
                        absl::FunctionRef<void(std::string_view, std::string_view)> visit) {
  std::unique_ptr<rocksdb::Iterator> it(db.NewIterator(rocksdb::ReadOptions(), family));
  for (it->Seek(ToSlice(prefix)); it->Valid() && it->key().starts_with(ToSlice(prefix));
       it->Next()) {
    visit(ToView(it->key()), ToView(it->value()));
  }
  return FromRocks(it->status(), "scan");
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChunkIndex>> ChunkIndex::Open(const std::string& path) {
  GRANARY_RETURN_IF_ERROR(CreatePrivateDirectory(path, "index directory"));
  rocksdb::Options options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  options.info_log_level = rocksdb::WARN_LEVEL;
  options.keep_log_file_num = 2;

  rocksdb::BlockBasedTableOptions table;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  rocksdb::ColumnFamilyOptions chunks_options;
  chunks_options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));

  std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, chunks_options},
      {kFileChunksFamily, rocksdb::ColumnFamilyOptions()},
      {kMetaFamily, rocksdb::ColumnFamilyOptions()},
  };
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  GRANARY_RETURN_IF_ERROR(FromRocks(rocksdb::DB::Open(options, path, families, &handles, &db),
                                    absl::StrCat("open ", path)));
  return std::unique_ptr<ChunkIndex>(new ChunkIndex(std::unique_ptr<rocksdb::DB>(db), handles));
}

ChunkIndex::ChunkIndex(std::unique_ptr<rocksdb::DB> db,
                       std::vector<rocksdb::ColumnFamilyHandle*> handles)
    : db_(std::move(db)), chunks_(handles[0]), file_chunks_(handles[1]), meta_(handles[2]) {}

ChunkIndex::~ChunkIndex() {
  for (auto* handle : {chunks_, file_chunks_, meta_}) db_->DestroyColumnFamilyHandle(handle);
}

absl::StatusOr<std::optional<v1::ChunkLocation>> ChunkIndex::Get(std::string_view key) const {
  std::string value;
  const rocksdb::Status status = db_->Get(rocksdb::ReadOptions(), chunks_, ToSlice(key), &value);
  if (status.IsNotFound()) return std::nullopt;
  GRANARY_RETURN_IF_ERROR(FromRocks(status, "get"));
  v1::ChunkLocation location;
  if (!location.ParseFromString(value)) {
    return absl::DataLossError("chunk index: unparsable chunk location");
  }
  return location;
}

absl::Status ChunkIndex::Put(std::string_view key, const v1::ChunkLocation& location,
                             bool unmark_synced) {
  rocksdb::WriteBatch batch;
  batch.Put(chunks_, ToSlice(key), location.SerializeAsString());
  batch.Put(file_chunks_, FilePrefix(location.data_file_id()) + std::string(key), "");
  if (unmark_synced) batch.Delete(meta_, SyncedKey(location.data_file_id()));
  return FromRocks(db_->Write(rocksdb::WriteOptions(), &batch), "put");
}

absl::Status ChunkIndex::Delete(std::string_view key, uint64_t file_id) {
  rocksdb::WriteBatch batch;
  batch.Delete(chunks_, ToSlice(key));
  batch.Delete(file_chunks_, FilePrefix(file_id) + std::string(key));
  return FromRocks(db_->Write(rocksdb::WriteOptions(), &batch), "delete");
}

absl::Status ChunkIndex::DeleteFile(uint64_t file_id) {
  const std::string prefix = FilePrefix(file_id);
  rocksdb::WriteBatch batch;
  GRANARY_RETURN_IF_ERROR(
      ScanPrefix(*db_, file_chunks_, prefix, [&](std::string_view key, std::string_view) {
        batch.Delete(chunks_, ToSlice(key.substr(prefix.size())));
        batch.Delete(file_chunks_, ToSlice(key));
      }));
  batch.Delete(meta_, SyncedKey(file_id));
  return FromRocks(db_->Write(rocksdb::WriteOptions(), &batch), "delete data file");
}

absl::Status ChunkIndex::ForEach(
    absl::FunctionRef<void(std::string_view key, const v1::ChunkLocation& location)> visit) const {
  return ScanPrefix(*db_, chunks_, "", [&](std::string_view key, std::string_view value) {
    v1::ChunkLocation location;
    if (!location.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
      GRANARY_LOG(ERROR) << "chunk index: skipping an unparsable location";
      return;
    }
    visit(key, location);
  });
}

absl::StatusOr<std::vector<std::pair<std::string, v1::ChunkLocation>>> ChunkIndex::ChunksOfVersion(
    uint64_t dataset_version) const {
  std::vector<std::pair<std::string, v1::ChunkLocation>> chunks;
  GRANARY_RETURN_IF_ERROR(
      ScanPrefix(*db_, chunks_, ChunkKey::VersionPrefix(dataset_version),
                 [&](std::string_view key, std::string_view value) {
                   v1::ChunkLocation location;
                   if (location.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
                     chunks.emplace_back(std::string(key), std::move(location));
                   }
                 }));
  return chunks;
}

absl::Status ChunkIndex::MarkSynced(const std::vector<uint64_t>& file_ids) {
  rocksdb::WriteBatch batch;
  for (uint64_t file_id : file_ids) batch.Put(meta_, SyncedKey(file_id), "");
  return FromRocks(db_->Write(rocksdb::WriteOptions(), &batch), "mark synced");
}

absl::StatusOr<std::set<uint64_t>> ChunkIndex::SyncedFiles() const {
  std::set<uint64_t> synced;
  GRANARY_RETURN_IF_ERROR(ScanPrefix(*db_, meta_, std::string(1, kSyncedTag),
                                     [&](std::string_view key, std::string_view) {
                                       synced.insert(ReadBigEndian(key.substr(1), 8));
                                     }));
  return synced;
}

absl::Status ChunkIndex::SetVersionState(uint64_t dataset_version, VersionState state) {
  const std::string key = VersionKey(dataset_version);
  if (state == VersionState::kInactive) {
    return FromRocks(db_->Delete(rocksdb::WriteOptions(), meta_, key), "set version state");
  }
  const std::string value(
      1, static_cast<char>(state == VersionState::kHeld ? VersionState::kActive : state));
  return FromRocks(db_->Put(rocksdb::WriteOptions(), meta_, key, value), "set version state");
}

absl::StatusOr<std::map<uint64_t, VersionState>> ChunkIndex::VersionStates() const {
  std::map<uint64_t, VersionState> states;
  GRANARY_RETURN_IF_ERROR(ScanPrefix(
      *db_, meta_, std::string(1, kVersionTag), [&](std::string_view key, std::string_view value) {
        if (value.size() != 1) return;
        const auto state = static_cast<VersionState>(value[0]);
        if (state == VersionState::kActive || state == VersionState::kPinned) {
          states[ReadBigEndian(key.substr(1), 8)] = state;
        }
      }));
  return states;
}

}  // namespace granary::store
