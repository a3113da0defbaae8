#include "tests/faults/cluster_faults.h"

#include <sys/wait.h>

#include <optional>

#include "absl/strings/str_cat.h"
#include "common/base/file_util.h"
#include "tests/support/child_process.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {

std::map<std::string, std::vector<SourceFile>> FilesByOwner(const DatasetSnapshot& snapshot,
                                                            const std::vector<SourceFile>& files,
                                                            const ClusterMap& members,
                                                            std::string_view group) {
  std::map<std::string, std::vector<SourceFile>> owned;
  for (const SourceFile& file : files) {
    owned[members.Owners(KeyOf(snapshot, file.path), group, 1)[0]->id].push_back(file);
  }
  return owned;
}

ChunkKey KeyOf(const DatasetSnapshot& snapshot, const std::string& path) {
  return {snapshot.manifest.version(), snapshot.manifest.Find(path).value(), 0};
}

absl::StatusOr<double> TimedCat(const std::string& server, const std::string& dataset,
                                const SourceFile& file, ReadTally* tally,
                                std::chrono::milliseconds timeout) {
  TempDir temp;
  const std::string output = temp.path() + "/out";
  const std::string errors = temp.path() + "/err";
  Clock::time_point start = Clock::now();
  // Standard error to a file of its own: the CLI logs its failovers there.
  absl::StatusOr<pid_t> pid =
      SpawnChild("/bin/sh",
                 {"-c", "exec \"$@\" 2>\"" + errors + "\"", "sh", GRANARY_TEST_CLI_PATH, "--server",
                  server, "cat", dataset + "/" + file.path},
                 output);
  if (!pid.ok()) return pid.status();
  std::optional<int> status = WaitForExit(*pid, timeout);
  const double seconds = SecondsSince(start);
  std::string bytes = ReadFileToString(output, "granary cat output").value_or("");
  std::string error_text = ReadFileToString(errors, "granary cat errors").value_or("");
  if (!status.has_value()) {
    KillChild(*pid);
    tally->errors++;
    return absl::DeadlineExceededError(absl::StrCat(
        "granary cat ", file.path, " did not exit within ", timeout.count(), " ms: ", error_text));
  }
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    tally->errors++;
    return absl::InternalError(absl::StrCat("granary cat ", file.path, " failed: ", error_text));
  }
  tally->bytes_read += bytes.size();
  TallyRead(bytes, ExpectedBytes(file.seed, 0, file.size), tally);
  return seconds;
}

double TimedRead(const std::string& path, const SourceFile& file, ReadTally* tally) {
  Clock::time_point start = Clock::now();
  ReadAndVerify(path, file, tally);
  return SecondsSince(start);
}

}  // namespace granary::testing
