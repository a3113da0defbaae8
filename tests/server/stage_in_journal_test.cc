// StageInJournal over a real RocksDB: what it records survives a reopen,
// oldest first and without what the queue tells again; a record that does
// not parse and a path that cannot hold a database are reported naming
// them.
#include "cache_server/staging/stage_in_journal.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "rocksdb/db.h"
#include "tests/support/granaryd_process.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

v1::StageIn StageIn(const std::string& job_id, int64_t created_unix_ms) {
  v1::StageIn stage_in;
  stage_in.set_job_id(job_id);
  stage_in.add_datasets("ds1");
  stage_in.add_datasets("ds2");
  stage_in.set_created_unix_ms(created_unix_ms);
  stage_in.set_state("planned");
  stage_in.add_groups("rack-a");
  stage_in.set_hold("held");
  return stage_in;
}

TEST(StageInJournalTest, RecordsSurviveAReopenOldestFirst) {
  testing::TempDir dir;
  const std::string path = absl::StrCat(dir.path(), "/staging");
  {
    auto journal = StageInJournal::Open(path);
    ASSERT_TRUE(journal.ok()) << journal.status();
    ASSERT_TRUE((*journal)->Put(StageIn("30", 3000)).ok());
    ASSERT_TRUE((*journal)->Put(StageIn("7", 1000)).ok());
    ASSERT_TRUE((*journal)->Put(StageIn("12", 2000)).ok());
    ASSERT_TRUE((*journal)->Erase("12").ok());
  }
  auto journal = StageInJournal::Open(path);
  ASSERT_TRUE(journal.ok()) << journal.status();
  auto loaded = (*journal)->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->size(), 2u);
  EXPECT_EQ((*loaded)[0].job_id(), "7");
  EXPECT_EQ((*loaded)[1].job_id(), "30");
  EXPECT_EQ((*loaded)[1].created_unix_ms(), 3000);
  EXPECT_THAT((*loaded)[1].datasets(), ::testing::ElementsAre("ds1", "ds2"));
  // The forecast, groups and hold come from the queue again.
  EXPECT_EQ((*loaded)[1].state(), "");
  EXPECT_TRUE((*loaded)[1].groups().empty());
  EXPECT_EQ((*loaded)[1].hold(), "");
}

TEST(StageInJournalTest, ARecordThatDoesNotParseIsNamed) {
  testing::TempDir dir;
  const std::string path = absl::StrCat(dir.path(), "/staging");
  {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, path, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "44", "\xff\xff not a record").ok());
  }
  auto journal = StageInJournal::Open(path);
  ASSERT_TRUE(journal.ok()) << journal.status();
  auto loaded = (*journal)->Load();
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(loaded.status().message(), HasSubstr("job '44'"));
  EXPECT_THAT(loaded.status().message(), HasSubstr(path));
}

TEST(StageInJournalTest, APathThatCannotHoldADatabaseIsNamed) {
  testing::TempDir dir;
  const std::string path = absl::StrCat(dir.path(), "/file");
  std::ofstream(path) << "not a directory";
  auto journal = StageInJournal::Open(path);
  EXPECT_EQ(journal.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(journal.status().message(), HasSubstr(path));
}

}  // namespace
}  // namespace granary
