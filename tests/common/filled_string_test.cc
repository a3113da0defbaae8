#include "common/base/filled_string.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace granary {
namespace {

TEST(FilledStringTest, HoldsExactlyTheBytesTheFillWrote) {
  // Sizes around GCC 12's resize_and_overwrite growth bug, and a chunk's.
  for (size_t length : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{24}, size_t{31},
                        size_t{4096}, size_t{4} << 20}) {
    absl::StatusOr<std::string> filled = FilledString(length, [&](std::span<char> out) {
      EXPECT_EQ(out.size(), length);
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>('a' + i % 26);
      return absl::OkStatus();
    });
    ASSERT_TRUE(filled.ok()) << filled.status();
    ASSERT_EQ(filled->size(), length);
    for (size_t i = 0; i < length; ++i) ASSERT_EQ((*filled)[i], static_cast<char>('a' + i % 26));
  }
}

TEST(FilledStringTest, AFailedFillIsItsError) {
  absl::StatusOr<std::string> filled = FilledString(4096, [](std::span<char> out) {
    std::fill(out.begin(), out.begin() + 100, 'x');
    return absl::DataLossError("short read of /src/a at 100");
  });
  ASSERT_FALSE(filled.ok());
  EXPECT_EQ(filled.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(filled.status().message(), "short read of /src/a at 100");
}

}  // namespace
}  // namespace granary
