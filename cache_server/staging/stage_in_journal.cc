#include "cache_server/staging/stage_in_journal.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "rocksdb/db.h"

namespace granary {
namespace {

absl::Status RocksStatus(const rocksdb::Status& status, const std::string& what) {
  if (status.ok()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("stage-in journal: ", what, ": ", status.ToString()));
}

}  // namespace

StageInJournal::StageInJournal(std::unique_ptr<rocksdb::DB> db, std::string path)
    : db_(std::move(db)), path_(std::move(path)) {}

StageInJournal::~StageInJournal() = default;

absl::StatusOr<std::unique_ptr<StageInJournal>> StageInJournal::Open(const std::string& path) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.compression = rocksdb::kNoCompression;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status opened = rocksdb::DB::Open(options, path, &raw);
  if (!opened.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot open the stage-in journal at ", path, ": ", opened.ToString()));
  }
  return std::unique_ptr<StageInJournal>(
      new StageInJournal(std::unique_ptr<rocksdb::DB>(raw), path));
}

absl::Status StageInJournal::Put(const v1::StageIn& stage_in) {
  v1::StageIn record;
  record.set_job_id(stage_in.job_id());
  *record.mutable_datasets() = stage_in.datasets();
  record.set_created_unix_ms(stage_in.created_unix_ms());
  return RocksStatus(
      db_->Put(rocksdb::WriteOptions(), stage_in.job_id(), record.SerializeAsString()),
      absl::StrCat("recording job ", stage_in.job_id()));
}

absl::Status StageInJournal::Erase(const std::string& job_id) {
  return RocksStatus(db_->Delete(rocksdb::WriteOptions(), job_id),
                     absl::StrCat("forgetting job ", job_id));
}

absl::StatusOr<std::vector<v1::StageIn>> StageInJournal::Load() const {
  std::vector<v1::StageIn> records;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    v1::StageIn record;
    if (!record.ParseFromArray(it->value().data(), static_cast<int>(it->value().size())) ||
        record.job_id() != it->key().ToString()) {
      return absl::DataLossError(absl::StrCat("stage-in journal at ", path_,
                                              ": the record of job '", it->key().ToString(),
                                              "' does not parse"));
    }
    records.push_back(std::move(record));
  }
  GRANARY_RETURN_IF_ERROR(RocksStatus(it->status(), "reading the stage-ins"));
  std::sort(records.begin(), records.end(), [](const v1::StageIn& a, const v1::StageIn& b) {
    return std::tuple(a.created_unix_ms(), a.job_id()) <
           std::tuple(b.created_unix_ms(), b.job_id());
  });
  return records;
}

}  // namespace granary
