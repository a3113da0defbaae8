// Replays a fuzz target's saved corpus (GRANARY_FUZZ_CORPUS: seeds, and the
// input of every crash ever found) through its LLVMFuzzerTestOneInput in the
// normal build, so each saved input stays a regression test even where clang
// and libFuzzer are not used. A property that fails aborts the test.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace granary {
namespace {

TEST(CorpusReplay, EverySavedInputKeepsTheTargetsProperties) {
  int replayed = 0;
  for (const auto& file : std::filesystem::directory_iterator(GRANARY_FUZZ_CORPUS)) {
    std::ifstream in(file.path(), std::ios::binary);
    std::string input((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // A failing property aborts the process: this line names the input.
    std::fprintf(stderr, "replaying %s\n", file.path().c_str());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    ++replayed;
  }
  EXPECT_GT(replayed, 0) << "no saved inputs in " << GRANARY_FUZZ_CORPUS;
}

}  // namespace
}  // namespace granary
