// SourceReadsInFlight: a read is told of the earlier reads overlapping it, by
// where they begin; a reader is never told of a fill, a fill of both; a
// read gets the bytes an earlier one finished with, or null when that one
// failed or was dropped unfinished; a finished read is no longer listed.
#include "cache_server/read_path/source_reads_in_flight.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace granary {
namespace {

const ChunkKey kChunk{7, 3, 0};

TEST(SourceReadsInFlight, AReadIsToldOfEarlierOverlappingReadsAndGetsTheirBytes) {
  SourceReadsInFlight reads;
  SourceReadsInFlight::Reading blocks = reads.Begin(kChunk, 8192, 16384, /*for_reader=*/true);
  auto head = std::make_unique<SourceReadsInFlight::Reading>(
      reads.Begin(kChunk, 0, 4096, /*for_reader=*/true));
  SourceReadsInFlight::Reading other_chunk = reads.Begin({7, 3, 1}, 0, 65536, true);
  EXPECT_TRUE(blocks.earlier().empty());
  SourceReadsInFlight::Reading whole = reads.Begin(kChunk, 0, 65536, /*for_reader=*/true);
  ASSERT_EQ(whole.earlier().size(), 2u);
  EXPECT_EQ(whole.earlier()[0].begin, 0u);
  EXPECT_EQ(whole.earlier()[1].begin, 8192u);
  EXPECT_EQ(whole.earlier()[1].end, 16384u);

  auto bytes = std::make_shared<const std::string>(8192, 'b');
  blocks.Finish(bytes);
  EXPECT_EQ(whole.earlier()[1].bytes.get(), bytes);
  head.reset();  // Dropped unfinished: failed.
  EXPECT_EQ(whole.earlier()[0].bytes.get(), nullptr);
  SourceReadsInFlight::Reading later = reads.Begin(kChunk, 9000, 9100, /*for_reader=*/true);
  ASSERT_EQ(later.earlier().size(), 1u) << "finished reads are no longer listed";
  EXPECT_EQ(later.earlier()[0].begin, 0u);
}

TEST(SourceReadsInFlight, ReadersAreNeverToldOfFillsAndFillsOfBoth) {
  SourceReadsInFlight reads;
  SourceReadsInFlight::Reading fill = reads.Begin(kChunk, 0, 65536, /*for_reader=*/false);
  SourceReadsInFlight::Reading reader = reads.Begin(kChunk, 4096, 8192, /*for_reader=*/true);
  EXPECT_TRUE(reader.earlier().empty()) << "a reader never waits behind a fill";
  SourceReadsInFlight::Reading second_fill = reads.Begin(kChunk, 0, 65536, /*for_reader=*/false);
  EXPECT_EQ(second_fill.earlier().size(), 2u);
}

}  // namespace
}  // namespace granary
