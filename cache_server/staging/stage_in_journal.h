// StageInJournal is granaryd's durable record of the stage-ins it follows, so
// that a restart (a crash, an upgrade) picks them up again: a RocksDB
// database under <data-dir>/staging, job id -> v1::StageIn holding what the
// hook asked for and nothing the queue can tell again (the job id, its
// datasets and when the stage-in began). Forecasts, targets and holds are
// rebuilt by the next reading of the queue; chunks already cached are not
// fetched again.
//
// Writes go to RocksDB's write-ahead log without fsync, as the chunk index's
// do: a killed process loses nothing the operating system has.
//
// Thread-safety: all methods may be called concurrently.
#ifndef GRANARY_CACHE_SERVER_STAGING_STAGE_IN_JOURNAL_H_
#define GRANARY_CACHE_SERVER_STAGING_STAGE_IN_JOURNAL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/staging.pb.h"

namespace rocksdb {
class DB;
}  // namespace rocksdb

namespace granary {

class StageInJournal {
 public:
  // Opens or creates the journal at `path`; UNAVAILABLE naming it otherwise.
  static absl::StatusOr<std::unique_ptr<StageInJournal>> Open(const std::string& path);
  ~StageInJournal();
  StageInJournal(const StageInJournal&) = delete;
  StageInJournal& operator=(const StageInJournal&) = delete;

  // Records the job id, datasets and creation time of `stage_in`, in place
  // of what was recorded for its job.
  absl::Status Put(const v1::StageIn& stage_in);
  absl::Status Erase(const std::string& job_id);
  // Every stage-in recorded, oldest first. DATA_LOSS naming the job of a
  // record that does not parse.
  absl::StatusOr<std::vector<v1::StageIn>> Load() const;

 private:
  StageInJournal(std::unique_ptr<rocksdb::DB> db, std::string path);

  const std::unique_ptr<rocksdb::DB> db_;
  const std::string path_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_STAGING_STAGE_IN_JOURNAL_H_
