// FaultTest: the stage every fault test starts from: a source tree, a real
// granaryd with the tree registered as dataset "ds", and optionally a real
// mount of it, plus the checks the tests share (every cached chunk verified,
// metrics read).
//
// Thread-safety: a GoogleTest fixture; one test thread.
#ifndef GRANARY_TESTS_FAULTS_FAULT_FIXTURE_H_
#define GRANARY_TESTS_FAULTS_FAULT_FIXTURE_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "proto/granary.grpc.pb.h"
#include "tests/faults/fault_support.h"
#include "tests/fuse/fuse_mount.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {

class FaultTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kChunk = 1 << 20;

  // Starts granaryd and registers source_ as "ds" with 1 MiB chunks.
  void StartServerAndRegister(GranarydOptions options = {});
  // Mounts the server's datasets; mounted_ is then the dataset's directory.
  void Mount(std::vector<std::string> extra_args = {});

  // A metric of the server; fails the test (and answers -1) if absent.
  double Metric(const std::string& name);
  // The file id of `path` in the manifest.
  uint64_t FileId(const std::string& path) const;
  // Reads every chunk of `files` from the server with cache_only and checks
  // the bytes of those it holds; returns how many it holds.
  uint64_t VerifyCachedChunks(const std::vector<SourceFile>& files, ReadTally* tally);
  // Prewarms all of "ds" to the end; the last progress message.
  v1::PrewarmProgress PrewarmAll();

  TempDir source_dir_;
  std::string source_ = source_dir_.path() + "/src";
  std::unique_ptr<GranarydProcess> server_;
  std::unique_ptr<v1::Granary::Stub> stub_;
  v1::DatasetInfo info_;
  std::vector<v1::ManifestEntry> entries_;
  std::unique_ptr<FuseMount> mount_;  // Declared last: unmounted first.
  std::string mounted_;
};

}  // namespace granary::testing

#endif  // GRANARY_TESTS_FAULTS_FAULT_FIXTURE_H_
