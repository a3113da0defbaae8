// Every granary command run as the real binary against a real granaryd: exit
// statuses, --json documents parsed back, bytes read through the cache compared
// with the source, and the one-line reasons of the error paths.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/support/granaryd_process.h"
#include "tests/support/suite_setup.h"

namespace granary {
namespace {

using nlohmann::json;
using testing::GranarydProcess;
using testing::SuiteSetup;
using testing::TempDir;

struct CliResult {
  int exit_code = -1;  // -1: killed by a signal.
  std::string out;
  std::string err;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs the granary binary with `args`, standard output and error captured.
// `server_env`, if set, becomes $GRANARY_SERVER; otherwise it is unset.
CliResult RunGranary(const std::vector<std::string>& args, const char* server_env = nullptr) {
  TempDir capture;
  std::string out_path = capture.path() + "/out";
  std::string err_path = capture.path() + "/err";
  std::vector<std::string> argv_storage{GRANARY_CLI_PATH};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    if (server_env != nullptr) {
      ::setenv("GRANARY_SERVER", server_env, 1);
    } else {
      ::unsetenv("GRANARY_SERVER");
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  CliResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = ReadFile(out_path);
  result.err = ReadFile(err_path);
  return result;
}

// One reason on one line, prefixed with the program's name.
void ExpectOneLineError(const CliResult& result, const std::string& mentions) {
  EXPECT_NE(result.exit_code, 0) << result.out;
  EXPECT_TRUE(result.err.starts_with("granary: ")) << result.err;
  ASSERT_FALSE(result.err.empty());
  EXPECT_EQ(result.err.find('\n'), result.err.size() - 1) << result.err;
  EXPECT_NE(result.err.find(mentions), std::string::npos) << result.err;
}

json ParseJson(const CliResult& result) {
  EXPECT_EQ(result.exit_code, 0) << result.err;
  return json::parse(result.out);  // Throws, failing the test, unless one document.
}

std::string RandomBytes(size_t size, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::string bytes(size, '\0');
  for (char& byte : bytes) byte = static_cast<char>(random());
  return bytes;
}

void WriteFile(const std::filesystem::path& path, const std::string& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

class CliTest : public ::testing::Test {
 protected:
  static void StartServer() {
    auto server = GranarydProcess::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server).release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    suite_setup_ = SuiteSetup();
  }

  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(suite_setup_.RunOnce(StartServer));
    // Files of several chunks (1 MiB chunks), an exact chunk, small, empty and
    // nested files.
    files_ = {
        {"a.txt", "hello granary\n"},
        {"empty", ""},
        {"nested/one_chunk.bin", RandomBytes(1 << 20, 1)},
        {"nested/deep/dir/multi.bin", RandomBytes((5 << 19) + 3, 2)},
    };
    for (int i = 0; i < 20; ++i) {
      files_[absl::StrCat("many/file", i, ".bin")] = RandomBytes(1000 + 37 * i, 100 + i);
    }
    for (const auto& [path, bytes] : files_) WriteFile(source() / path, bytes);
  }

  std::filesystem::path source() const { return std::filesystem::path(source_dir_.path()); }

  // granary --server <the test's server> args...
  static CliResult Granary(std::vector<std::string> args) {
    args.insert(args.begin(), {"--server", server_->socket_address()});
    return RunGranary(args);
  }

  uint64_t TotalBytes() const {
    uint64_t total = 0;
    for (const auto& [path, bytes] : files_) total += bytes.size();
    return total;
  }

  json AddDataset(const std::string& name) {
    return ParseJson(
        Granary({"dataset", "add", name, source().string(), "--chunk-size", "1MiB", "--json"}));
  }

  static SuiteSetup suite_setup_;
  static GranarydProcess* server_;
  TempDir source_dir_;
  std::map<std::string, std::string> files_;
};

SuiteSetup CliTest::suite_setup_;
GranarydProcess* CliTest::server_ = nullptr;

TEST_F(CliTest, DatasetAddListShowRefreshRemove) {
  json added = AddDataset("life");
  EXPECT_EQ(added["name"], "life");
  EXPECT_EQ(added["file_count"], files_.size());
  EXPECT_EQ(added["total_bytes"], TotalBytes());
  EXPECT_EQ(added["chunk_size"], 1 << 20);
  std::string version = added["version"];
  EXPECT_EQ(version.size(), 16u);

  json listed = ParseJson(Granary({"dataset", "ls", "--json"}));
  bool found = false;
  for (const json& dataset : listed["datasets"]) found |= dataset["name"] == "life";
  EXPECT_TRUE(found) << listed.dump();

  json shown = ParseJson(Granary({"dataset", "show", "life", "--json"}));
  EXPECT_EQ(shown["version"], version);
  EXPECT_EQ(shown["source"], source().string());

  json unchanged = ParseJson(Granary({"dataset", "refresh", "life", "--json"}));
  EXPECT_EQ(unchanged["changed"], false);
  EXPECT_EQ(unchanged["version"], version);

  WriteFile(source() / "added_later.txt", "new\n");
  json refreshed = ParseJson(Granary({"dataset", "refresh", "life", "--json"}));
  EXPECT_EQ(refreshed["changed"], true);
  EXPECT_EQ(refreshed["previous_version"], version);
  EXPECT_NE(refreshed["version"], version);
  EXPECT_EQ(refreshed["file_count"], files_.size() + 1);

  // The message says what of the old version stays readable, and for how long.
  WriteFile(source() / "added_even_later.txt", "newer\n");
  CliResult told = Granary({"dataset", "refresh", "life"});
  EXPECT_EQ(told.exit_code, 0) << told.err;
  const std::string previous = refreshed["version"];
  EXPECT_NE(told.out.find("files opened before keep reading version " + previous + " while open"),
            std::string::npos)
      << told.out;
  EXPECT_NE(told.out.find("a file changed there since reads as ESTALE"), std::string::npos)
      << told.out;
  EXPECT_NE(told.out.find("released once none of its files is open and the grace period has "
                          "passed"),
            std::string::npos)
      << told.out;

  CliResult human = Granary({"dataset", "ls"});
  EXPECT_EQ(human.exit_code, 0) << human.err;
  EXPECT_NE(human.out.find("NAME"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("life"), std::string::npos) << human.out;

  json removed = ParseJson(Granary({"dataset", "rm", "life", "--json"}));
  EXPECT_EQ(removed["removed"], true);
  ExpectOneLineError(Granary({"dataset", "show", "life"}), "life");
}

TEST_F(CliTest, PrewarmReachesOneHundredPercentThenEverythingIsCached) {
  json added = AddDataset("warm");
  CliResult first = Granary({"prewarm", "warm", "--json"});
  json done = ParseJson(first);
  EXPECT_EQ(done["finished"], true);
  EXPECT_DOUBLE_EQ(done["percent"].get<double>(), 100.0);
  EXPECT_EQ(done["bytes_done"], TotalBytes());
  EXPECT_EQ(done["bytes_total"], TotalBytes());
  EXPECT_EQ(done["chunks_total"], added["chunk_count"]);
  EXPECT_TRUE(done["failures"].empty());
  // Not a terminal: plain progress lines on stderr, ending at 100%.
  EXPECT_NE(first.err.find("prewarm warm: 100.0%"), std::string::npos) << first.err;

  json again = ParseJson(Granary({"prewarm", "warm", "--json"}));
  EXPECT_DOUBLE_EQ(again["percent"].get<double>(), 100.0);
  EXPECT_EQ(again["chunks_already_cached"], again["chunks_total"]);

  json shown = ParseJson(Granary({"dataset", "show", "warm", "--json"}));
  EXPECT_EQ(shown["cached_bytes"], TotalBytes());

  json located = ParseJson(Granary({"locate", "warm", "--json"}));
  EXPECT_EQ(located["name"], "warm");
  EXPECT_EQ(located["total_bytes"], TotalBytes());
  ASSERT_EQ(located["nodes"].size(), 1u);
  EXPECT_DOUBLE_EQ(located["nodes"][0]["node_fraction"].get<double>(), 1.0);

  CliResult summary = Granary({"prewarm", "warm"});
  EXPECT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_NE(summary.out.find("prewarmed 'warm' on 1 node: 100.0%"), std::string::npos)
      << summary.out;
}

TEST_F(CliTest, PrewarmOfSomePathsAndTargets) {
  AddDataset("partial");
  json some =
      ParseJson(Granary({"prewarm", "partial", "--paths", "nested/deep", "a.txt", "--json"}));
  EXPECT_EQ(some["bytes_total"],
            files_["nested/deep/dir/multi.bin"].size() + files_["a.txt"].size());
  EXPECT_DOUBLE_EQ(some["percent"].get<double>(), 100.0);

  json status = ParseJson(Granary({"status", "--json"}));
  ASSERT_EQ(status["nodes"].size(), 1u);
  std::string node = status["nodes"][0]["node_id"];
  std::string group = status["nodes"][0]["group"];
  EXPECT_EQ(ParseJson(Granary({"prewarm", "partial", "--group", group, "--json"}))["percent"],
            100.0);
  EXPECT_EQ(ParseJson(Granary({"prewarm", "partial", "--nodes", node, "--json"}))["percent"],
            100.0);
  ExpectOneLineError(Granary({"prewarm", "partial", "--group", "no-such-group"}), "no-such-group");
  ExpectOneLineError(Granary({"prewarm", "partial", "--nodes", node + ",no-such-node"}),
                     "no-such-node");
}

TEST_F(CliTest, PrewarmListsEveryFailedFileAndFails) {
  AddDataset("broken");
  std::filesystem::remove(source() / "a.txt");
  WriteFile(source() / "many/file3.bin", "changed since registration");

  CliResult human = Granary({"prewarm", "broken"});
  EXPECT_NE(human.exit_code, 0);
  // Progress lines come first; the reason is the last line, with the first
  // failure's.
  EXPECT_NE(human.err.find("\ngranary: 2 files of 'broken' failed to prewarm; the first: "),
            std::string::npos)
      << human.err;
  EXPECT_TRUE(human.err.ends_with("\n")) << human.err;
  EXPECT_NE(human.out.find("  a.txt: "), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("  many/file3.bin: "), std::string::npos) << human.out;

  CliResult result = Granary({"prewarm", "broken", "--json"});
  EXPECT_NE(result.exit_code, 0);
  json document = json::parse(result.out);
  EXPECT_EQ(document["finished"], true);
  EXPECT_LT(document["percent"].get<double>(), 100.0);
  std::set<std::string> failed;
  for (const json& failure : document["failures"]) failed.insert(failure["path"]);
  EXPECT_EQ(failed, (std::set<std::string>{"a.txt", "many/file3.bin"}));
}

TEST_F(CliTest, CatReturnsTheSourceBytesOfEveryFile) {
  AddDataset("read");
  for (const auto& [path, bytes] : files_) {
    CliResult result = Granary({"cat", "read/" + path});
    ASSERT_EQ(result.exit_code, 0) << path << ": " << result.err;
    EXPECT_EQ(result.out, bytes) << path;
    EXPECT_TRUE(result.err.empty()) << result.err;
  }
  ExpectOneLineError(Granary({"cat", "read/nested"}), "is a directory");
  ExpectOneLineError(Granary({"cat", "read/no/such/file"}), "no/such/file");
  ExpectOneLineError(Granary({"cat", "read"}), "NAME/PATH");
}

// Linux names are bytes: a Latin-1 name registers, reads back, prints escaped
// and travels through --json as Python's surrogateescape reads it.
TEST_F(CliTest, NamesThatAreNotUtf8RegisterReadAndPrint) {
  const std::string latin1 = "caf\xe9.jpg";
  WriteFile(source() / latin1, "latin-1 named");
  const std::string dropped_link = "lien\xe9";
  ASSERT_EQ(::symlink("/etc/passwd", (source() / dropped_link).c_str()), 0);
  // Added without --json: the document names the dropped link with a lone
  // surrogate, which nlohmann::json (like other strict parsers) refuses.
  CliResult added = Granary({"dataset", "add", "bytes", source().string(), "--chunk-size", "1MiB"});
  ASSERT_EQ(added.exit_code, 0) << added.err;

  CliResult read = Granary({"cat", "bytes/" + latin1});
  ASSERT_EQ(read.exit_code, 0) << read.err;
  EXPECT_EQ(read.out, "latin-1 named");
  CliResult good = Granary({"cat", "bytes/a.txt"});
  EXPECT_EQ(good.out, files_["a.txt"]);

  CliResult shown = Granary({"dataset", "show", "bytes"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("lien\\xe9: symlink to /etc/passwd leaves the source"),
            std::string::npos)
      << shown.out;

  CliResult json_shown = Granary({"dataset", "show", "bytes", "--json"});
  ASSERT_EQ(json_shown.exit_code, 0) << json_shown.err;
  EXPECT_NE(json_shown.out.find(R"("path": "lien\udce9")"), std::string::npos) << json_shown.out;
  TempDir scratch;
  const std::string document = scratch.path() + "/show.json";
  std::ofstream(document) << json_shown.out;
  auto [code, bytes_hex] = [&] {
    std::string command =
        "python3 -c 'import json, os, sys; "
        "print(os.fsencode(json.load(open(sys.argv[1]))[\"skipped\"][0][\"path\"])"
        ".hex())' " +
        document;
    FILE* pipe = popen(command.c_str(), "r");
    char buffer[256] = {};
    size_t n = fread(buffer, 1, sizeof(buffer) - 1, pipe);
    return std::pair(pclose(pipe), std::string(buffer, n));
  }();
  EXPECT_EQ(code, 0);
  EXPECT_EQ(bytes_hex, "6c69656ee9\n");  // b"lien\xe9"
}

TEST_F(CliTest, StatusCountsHitsAfterReads) {
  AddDataset("stats");
  ParseJson(Granary({"prewarm", "stats", "--json"}));
  ASSERT_EQ(Granary({"cat", "stats/a.txt"}).exit_code, 0);
  json status = ParseJson(Granary({"status", "--json"}));
  EXPECT_GE(status["dataset_count"], 1);
  ASSERT_EQ(status["nodes"].size(), 1u);
  const json& node = status["nodes"][0];
  EXPECT_EQ(node["state"], "up");
  EXPECT_GT(node["used_bytes"], 0);
  EXPECT_GE(node["hits"], 1);
  EXPECT_FALSE(status["hit_ratio"].is_null());

  CliResult human = Granary({"status"});
  EXPECT_EQ(human.exit_code, 0) << human.err;
  EXPECT_NE(human.out.find("hit ratio: "), std::string::npos) << human.out;
}

// A cache of 64 MiB: tiny files are counted as the disk counts them, and a
// prewarm of a dataset twice the cache fails naming the share it holds.
TEST(CliSmallCacheTest, StatusAndPrewarmSayWhatTheCacheHolds) {
  auto server = GranarydProcess::Start({.extra_args = {"--capacity", "64MiB"}});
  ASSERT_TRUE(server.ok()) << server.status();
  auto granary = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--server", (*server)->socket_address()});
    return RunGranary(args);
  };
  TempDir tiny;
  for (int i = 0; i < 100; ++i) {
    WriteFile(std::filesystem::path(tiny.path()) / absl::StrCat("t", i), RandomBytes(100, i));
  }
  ParseJson(granary({"dataset", "add", "tiny", tiny.path(), "--json"}));
  ParseJson(granary({"prewarm", "tiny", "--json"}));
  json status = ParseJson(granary({"status", "--json"}));
  ASSERT_EQ(status["nodes"].size(), 1u);
  // 100 files of 100 bytes take a 4 KiB block each.
  EXPECT_EQ(status["nodes"][0]["used_bytes"], 100 * 4096);

  TempDir large;
  for (int i = 0; i < 32; ++i) {
    WriteFile(std::filesystem::path(large.path()) / absl::StrCat("part-", i),
              RandomBytes(4 << 20, 1000 + i));
  }
  ParseJson(granary({"dataset", "add", "large", large.path(), "--chunk-size", "4MiB", "--json"}));
  CliResult prewarm = granary({"prewarm", "large"});
  EXPECT_NE(prewarm.exit_code, 0);
  EXPECT_NE(prewarm.err.find("this node holds "), std::string::npos) << prewarm.err;
  EXPECT_NE(prewarm.err.find("%) of its 128.0 MiB (capacity 64.0 MiB"), std::string::npos)
      << prewarm.err;
  EXPECT_EQ(prewarm.err.find("100.0%)"), std::string::npos) << prewarm.err;
  status = ParseJson(granary({"status", "--json"}));
  EXPECT_LE(status["nodes"][0]["used_bytes"].get<uint64_t>(), 64u << 20);
}

TEST_F(CliTest, ServerComesFromTheEnvironmentWithoutFlag) {
  CliResult result = RunGranary({"status", "--json"}, server_->socket_address().c_str());
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(json::parse(result.out)["nodes"].size(), 1u);
}

TEST_F(CliTest, ReachesTheServerOverTcpToo) {
  CliResult result = RunGranary({"--server", server_->tcp_address(), "--token-file",
                                 server_->cluster_token_file(), "status", "--json"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(json::parse(result.out)["nodes"].size(), 1u);
}

TEST_F(CliTest, BadInputFailsWithOneLineReason) {
  ExpectOneLineError(Granary({"dataset", "show", "nope"}), "nope");
  ExpectOneLineError(Granary({"dataset", "refresh", "nope"}), "nope");
  ExpectOneLineError(Granary({"dataset", "rm", "nope"}), "nope");
  ExpectOneLineError(Granary({"locate", "nope"}), "nope");
  ExpectOneLineError(Granary({"prewarm", "nope"}), "nope");
  ExpectOneLineError(Granary({"cat", "nope/a.txt"}), "nope");

  ExpectOneLineError(Granary({"dataset", "add", "sized", source().string(), "--chunk-size", "4XB"}),
                     "4XB");
  ExpectOneLineError(
      Granary({"dataset", "add", "sized", source().string(), "--chunk-size", "512KiB"}), "512KiB");
  ExpectOneLineError(Granary({"dataset", "add", "missing", source().string() + "/no-such-dir"}),
                     "no-such-dir");

  AddDataset("dup");
  ExpectOneLineError(Granary({"dataset", "add", "dup", source().string()}), "dup");

  std::string no_token = source().string() + "/no-token";
  ExpectOneLineError(Granary({"--token-file", no_token, "status"}), "no-token");
  ExpectOneLineError(Granary({"--token-file", no_token, "cat", "dup/a.txt"}), "no-token");

  CliResult usage = Granary({"dataset", "add", "only-a-name"});
  ExpectOneLineError(usage, "SOURCE");
  EXPECT_EQ(usage.exit_code, 2);
}

TEST(CliWithoutServer, UnreachableServerIsNamed) {
  TempDir dir;
  std::string address = "unix:" + dir.path() + "/no.sock";
  for (std::vector<std::string> command : std::vector<std::vector<std::string>>{
           {"status"}, {"dataset", "ls"}, {"prewarm", "x"}, {"cat", "x/y"}, {"locate", "x"}}) {
    command.insert(command.begin(), {"--server", address});
    ExpectOneLineError(RunGranary(command), address);
  }
  ExpectOneLineError(RunGranary({"--server", "no-port", "status"}), "no-port");
}

}  // namespace
}  // namespace granary
