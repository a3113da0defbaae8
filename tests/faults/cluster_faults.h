// What the fault tests between several servers (tests/faults) share: a
// dataset of one-chunk files registered on a GranaryCluster, which member of
// a group owns each file, and `granary cat` run as a real process and timed.
//
// Thread-safety: for one test thread.
#ifndef GRANARY_TESTS_FAULTS_CLUSTER_FAULTS_H_
#define GRANARY_TESTS_FAULTS_CLUSTER_FAULTS_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/dataset_client.h"
#include "common/cluster/cluster_map.h"
#include "tests/faults/fault_support.h"

namespace granary::testing {

// Chunk size of the cluster fault tests' datasets; their files are one chunk
// each, so a file has exactly one owner per group.
inline constexpr uint32_t kClusterChunk = 1 << 20;

// The files of `snapshot` among `files` whose chunk is owned first in
// `group` by each member, by `members`' ring.
std::map<std::string, std::vector<SourceFile>> FilesByOwner(const DatasetSnapshot& snapshot,
                                                            const std::vector<SourceFile>& files,
                                                            const ClusterMap& members,
                                                            std::string_view group);

// The chunk key of the (one-chunk) file `path` of `snapshot`.
ChunkKey KeyOf(const DatasetSnapshot& snapshot, const std::string& path);

// `granary --server SERVER cat DATASET/PATH` as a child process, checked
// against `file` into `tally`; how long it took, or its error output.
absl::StatusOr<double> TimedCat(const std::string& server, const std::string& dataset,
                                const SourceFile& file, ReadTally* tally,
                                std::chrono::milliseconds timeout = std::chrono::seconds(90));

// Reads `path` through a mount whole, checked against `file` into `tally`;
// how long it took.
double TimedRead(const std::string& path, const SourceFile& file, ReadTally* tally);

}  // namespace granary::testing

#endif  // GRANARY_TESTS_FAULTS_CLUSTER_FAULTS_H_
