// The open journal between a granary-fuse server and its connection keeper:
// records come out in order and only once, a full ring refuses more and
// says when it is half full, what a writer appended survives the writer's
// death, and a reader maps only rings whose size cannot change under it.
#include "fuse_client/restarts/open_journal.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <vector>

namespace granary::fuse {
namespace {

std::vector<OpenRecord> DrainAll(OpenJournalReader& reader) {
  std::vector<OpenRecord> records;
  reader.Drain([&](const OpenRecord& record) { records.push_back(record); });
  return records;
}

TEST(OpenJournal, RecordsComeOutInOrderOnceAndAFullRingRefusesMore) {
  constexpr size_t kCapacity = 8;
  auto writer = OpenJournalWriter::Create(kCapacity);
  ASSERT_TRUE(writer.ok()) << writer.status();
  auto reader = OpenJournalReader::Map((*writer)->fd());
  ASSERT_TRUE(reader.ok()) << reader.status();

  std::vector<OpenJournalWriter::Appended> answers;
  for (uint64_t i = 0; i < kCapacity + 1; ++i) {
    answers.push_back((*writer)->Append({i, static_cast<int32_t>(i % 3), i % 2 == 1 ? 1u : 0u}));
  }
  for (size_t i = 0; i < kCapacity; ++i) {
    EXPECT_EQ(answers[i], i + 1 == kCapacity / 2 ? OpenJournalWriter::Appended::kHalfFull
                                                 : OpenJournalWriter::Appended::kYes)
        << i;
  }
  EXPECT_EQ(answers.back(), OpenJournalWriter::Appended::kFull);

  std::vector<OpenRecord> drained = DrainAll(**reader);
  ASSERT_EQ(drained.size(), kCapacity);
  for (uint64_t i = 0; i < kCapacity; ++i) {
    EXPECT_EQ(drained[i].inode, i);
    EXPECT_EQ(drained[i].backing_id, static_cast<int32_t>(i % 3));
    EXPECT_EQ(drained[i].released, i % 2 == 1 ? 1u : 0u);
  }
  EXPECT_TRUE(DrainAll(**reader).empty()) << "a record came out twice";

  // Drained records made room, and the ring wraps.
  for (uint64_t i = 100; i < 100 + kCapacity; ++i) {
    EXPECT_NE((*writer)->Append({i, 0, 0}), OpenJournalWriter::Appended::kFull);
  }
  drained = DrainAll(**reader);
  ASSERT_EQ(drained.size(), kCapacity);
  EXPECT_EQ(drained.front().inode, 100u);
  EXPECT_EQ(drained.back().inode, 100 + kCapacity - 1);
}

TEST(OpenJournal, WhatAWriterAppendedOutlivesItsProcess) {
  auto writer = OpenJournalWriter::Create(1024);
  ASSERT_TRUE(writer.ok()) << writer.status();
  auto reader = OpenJournalReader::Map((*writer)->fd());
  ASSERT_TRUE(reader.ok()) << reader.status();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (uint64_t i = 0; i < 500; ++i) (*writer)->Append({i, 1, 0});
    ::kill(::getpid(), SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  std::vector<OpenRecord> drained = DrainAll(**reader);
  ASSERT_EQ(drained.size(), 500u);
  EXPECT_EQ(drained.back().inode, 499u);
}

TEST(OpenJournal, AReaderRefusesARingWhoseSizeCanChangeOrThatHoldsNone) {
  const int resizable = ::memfd_create("resizable", MFD_CLOEXEC);
  ASSERT_GE(resizable, 0);
  ASSERT_EQ(::ftruncate(resizable, 1 << 20), 0);
  auto unsealed = OpenJournalReader::Map(resizable);
  EXPECT_TRUE(absl::IsInvalidArgument(unsealed.status())) << unsealed.status();
  ::close(resizable);

  const int tiny = ::memfd_create("tiny", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(tiny, 0);
  ASSERT_EQ(::ftruncate(tiny, 64), 0);
  ASSERT_EQ(::fcntl(tiny, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  auto small = OpenJournalReader::Map(tiny);
  EXPECT_TRUE(absl::IsInvalidArgument(small.status())) << small.status();
  ::close(tiny);
}

}  // namespace
}  // namespace granary::fuse
