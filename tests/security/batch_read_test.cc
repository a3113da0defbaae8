// Batches of whole files read past the kernel (client/granary_client.h,
// cache_server/read_path/batch_reads.h), attacked by a local user through a
// real granaryd: bob asks for a batch that mixes files he may read with one
// he may not, a missing path, a directory and paths that climb out; sends
// hostile batch messages on a raw connection (garbage, too many paths,
// descriptors of his own, another dataset's version, requests meant for
// granary-fuse); dies in the middle of a batch; and reads a file whose cached
// copy had a byte flipped on disk. Each time bob gets exactly what he may
// read, byte for byte the source, and granaryd goes on serving everyone with
// its descriptors bounded.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/granary_c.h"
#include "client/granary_client.h"
#include "common/net/datagram_socket.h"
#include "common/net/local_read_socket.h"
#include "gtest/gtest.h"
#include "tests/security/security_support.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {
namespace {

namespace fs = std::filesystem;

constexpr char kReaders[] = "granary-batch-readers";
constexpr char kAdmins[] = "granary-batch-admins";
constexpr int kSmallFiles = 200;

std::string SmallPath(int i) { return absl::StrCat("small/", i, ".bin"); }

int OpenDescriptors(pid_t pid) {
  int count = 0;
  for ([[maybe_unused]] const auto& entry :
       fs::directory_iterator(absl::StrCat("/proc/", pid, "/fd"))) {
    ++count;
  }
  return count;
}

// A granaryd run by root whose socket group is kReaders, and dataset "ds":
//   small/0.bin ... small/199.bin (1-40 KiB, 0644), secret.txt (0600),
//   dir/ (0755), big.bin (3 MiB, 0644), in chunks of 1 MiB.
// bob is a reader.
class BatchReadTest : public SharedNodeTest {
 protected:
  void SetUp() override {
    SetUpSharedNode("granary-batch-bob", kReaders, kAdmins);
    if (IsSkipped() || HasFatalFailure()) return;
    for (int i = 0; i < kSmallFiles; ++i) {
      WriteSourceFile(source_, SmallPath(i), PatternBytes(1024 + 197 * i, i));
    }
    WriteSourceFile(source_, "secret.txt", "for root alone 7f3a\n");
    ASSERT_EQ(::chmod((source_ + "/secret.txt").c_str(), 0600), 0);
    WriteSourceFile(source_, "dir/inner.txt", "inner\n");
    WriteSourceFile(source_, "big.bin", PatternBytes(3 << 20, 77));
    for (const char* path : {"", "/dir", "/small"}) ::chmod((source_ + path).c_str(), 0755);

    StartNodeWithDataset(
        absl::StrCat("socket_group: ", kReaders, "\nadmin_group: ", kAdmins, "\n"));
  }

  std::string SourceBytes(const std::string& path) const {
    std::ifstream in(source_ + "/" + path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  std::unique_ptr<GranaryClient> Client() {
    absl::StatusOr<std::unique_ptr<GranaryClient>> client =
        GranaryClient::Connect({.socket_path = server_->socket_path()});
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  // ReadMany of `paths` of "ds", made as bob.
  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> ReadManyAsBob(
      const std::vector<std::string>& paths) {
    std::unique_ptr<GranaryClient> client = Client();
    absl::StatusOr<std::vector<absl::StatusOr<std::string>>> read = absl::InternalError("not run");
    AsUserOnThread(bob_, {bob_.gid, readers_gid_}, [&] { read = client->ReadMany("ds", paths); });
    return read;
  }

  // Whether granaryd's open descriptors come back to `before` (and a few
  // more) within `timeout`.
  bool ReleasedWithin(int before, std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (OpenDescriptors(server_->pid()) > before + 8) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return true;
  }

  // A raw connection of bob's to the local read socket.
  UniqueFd BobsConnection() {
    int fd = -1;
    AsUserOnThread(bob_, {bob_.gid, readers_gid_}, [&] {
      fd = ConnectUnix(LocalReadSocketPath(server_->socket_path()), SOCK_SEQPACKET);
    });
    EXPECT_GE(fd, 0) << "bob cannot connect to the local read socket";
    return UniqueFd(fd);
  }
};

TEST_F(BatchReadTest, ARefusedFileIsRefusedAloneAndTheRestOfTheBatchIsServed) {
  const std::vector<std::string> paths = {SmallPath(0),  "secret.txt", SmallPath(1),
                                          "missing.bin", "dir",        "../ds/secret.txt",
                                          "/secret.txt", "big.bin"};
  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> read = ReadManyAsBob(paths);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), paths.size());
  EXPECT_EQ((*read)[0].value_or("<error>"), SourceBytes(SmallPath(0)));
  EXPECT_EQ((*read)[2].value_or("<error>"), SourceBytes(SmallPath(1)));
  EXPECT_EQ((*read)[7].value_or("<error>"), SourceBytes("big.bin"));
  EXPECT_EQ((*read)[1].status().code(), absl::StatusCode::kPermissionDenied) << (*read)[1].status();
  EXPECT_EQ((*read)[3].status().code(), absl::StatusCode::kNotFound) << (*read)[3].status();
  EXPECT_EQ((*read)[4].status().code(), absl::StatusCode::kInvalidArgument) << (*read)[4].status();
  EXPECT_EQ((*read)[5].status().code(), absl::StatusCode::kNotFound) << (*read)[5].status();
  EXPECT_EQ((*read)[6].status().code(), absl::StatusCode::kNotFound) << (*read)[6].status();
  ReportAttack(
      {"batch",
       "bob asks for a batch of 8 paths: 3 he may read, secret.txt (0600 root), "
       "a missing path, a directory, ../ and / paths",
       "local read socket", "secret.txt PERMISSION_DENIED alone; the 3 readable files served",
       (*read)[1].ok() ? "secret.txt's bytes" : std::string((*read)[1].status().message())});

  // Root reads it, in a batch of its own.
  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> as_root =
      Client()->ReadMany("ds", std::vector<std::string>{"secret.txt"});
  ASSERT_TRUE(as_root.ok()) << as_root.status();
  EXPECT_EQ((*as_root)[0].value_or("<error>"), SourceBytes("secret.txt"));

  // Every small file, in batches larger than one request.
  std::vector<std::string> all;
  for (int i = 0; i < kSmallFiles; ++i) all.push_back(SmallPath(i));
  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> everything = ReadManyAsBob(all);
  ASSERT_TRUE(everything.ok()) << everything.status();
  for (int i = 0; i < kSmallFiles; ++i) {
    ASSERT_EQ((*everything)[i].value_or("<error>"), SourceBytes(SmallPath(i))) << SmallPath(i);
  }

  // A large file read by ranges through a file object.
  std::unique_ptr<GranaryClient> client = Client();
  absl::StatusOr<std::unique_ptr<GranaryFile>> big = client->Open("ds", "big.bin");
  ASSERT_TRUE(big.ok()) << big.status();
  std::string piece(300000, '\0');
  absl::StatusOr<size_t> got = (*big)->ReadAt((1 << 20) - 1000, {piece.data(), piece.size()});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(piece, SourceBytes("big.bin").substr((1 << 20) - 1000, piece.size()));

  // Whole-batch errors.
  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> unknown =
      client->ReadMany("no-such-dataset", std::vector<std::string>{SmallPath(0)});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound) << unknown.status();
}

TEST_F(BatchReadTest, TheCInterfaceReadsABatchWithEachFilesOwnCode) {
  const std::vector<std::string> paths = {SmallPath(2), "secret.txt", "missing.bin", "big.bin"};
  std::vector<const char*> named;
  for (const std::string& path : paths) named.push_back(path.c_str());
  std::vector<char*> data(paths.size(), nullptr);
  std::vector<size_t> sizes(paths.size(), 0);
  std::vector<int> codes(paths.size(), -1);
  std::vector<char*> errors(paths.size(), nullptr);
  int code = -1;
  AsUserOnThread(bob_, {bob_.gid, readers_gid_}, [&] {
    granary_client* client = nullptr;
    char* error = nullptr;
    code = granary_connect(server_->socket_path().c_str(), &client, &error);
    if (code != 0) {
      ADD_FAILURE() << error;
      granary_free(error);
      return;
    }
    code = granary_read_many(client, "ds", named.data(), named.size(), data.data(), sizes.data(),
                             codes.data(), errors.data(), &error);
    if (code != 0) {
      ADD_FAILURE() << error;
      granary_free(error);
    }
    granary_close(client);
  });
  ASSERT_EQ(code, 0);
  EXPECT_EQ(codes[0], 0) << errors[0];
  EXPECT_EQ(std::string(data[0], sizes[0]), SourceBytes(SmallPath(2)));
  EXPECT_EQ(codes[1], static_cast<int>(absl::StatusCode::kPermissionDenied));
  EXPECT_EQ(data[1], nullptr);
  EXPECT_TRUE(absl::StrContains(errors[1], "secret.txt")) << errors[1];
  EXPECT_EQ(codes[2], static_cast<int>(absl::StatusCode::kNotFound));
  EXPECT_EQ(codes[3], 0) << errors[3];
  EXPECT_EQ(std::string(data[3], sizes[3]), SourceBytes("big.bin"));
  for (size_t i = 0; i < paths.size(); ++i) {
    granary_free(data[i]);
    granary_free(errors[i]);
  }

  granary_client* nowhere = nullptr;
  char* error = nullptr;
  ASSERT_EQ(granary_connect("/nonexistent/granaryd.sock", &nowhere, &error), 0);
  const char* one[] = {"x"};
  char* one_data[1] = {};
  size_t one_size[1] = {};
  int one_code[1] = {};
  char* one_error[1] = {};
  EXPECT_EQ(
      granary_read_many(nowhere, "ds", one, 1, one_data, one_size, one_code, one_error, &error),
      static_cast<int>(absl::StatusCode::kUnavailable));
  EXPECT_TRUE(absl::StrContains(error, "/nonexistent/granaryd.sock.local")) << error;
  granary_free(error);
  granary_close(nowhere);
}

TEST_F(BatchReadTest, AByteFlippedInACachedFileNeverReachesTheReader) {
  ASSERT_EQ(CliAs(*server_, nullptr, {"prewarm", "ds"}).exit_code, 0);
  const std::string target = SmallPath(7);
  const std::string expected = SourceBytes(target);
  int flipped = 0;
  for (const auto& entry : fs::recursive_directory_iterator(server_->data_dir())) {
    if (entry.path().extension() != ".dat") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (data != expected) continue;
    int fd = ::open(entry.path().c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    const char byte = static_cast<char>(data[100] ^ 0x5a);
    ASSERT_EQ(::pwrite(fd, &byte, 1, 100), 1);
    ::close(fd);
    ++flipped;
  }
  ASSERT_EQ(flipped, 1) << "the cached copy of " << target << " was not found";

  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> read =
      ReadManyAsBob({SmallPath(6), target, SmallPath(8)});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ((*read)[0].value_or("<error>"), SourceBytes(SmallPath(6)));
  EXPECT_EQ((*read)[1].value_or("<error>"), expected);
  EXPECT_EQ((*read)[2].value_or("<error>"), SourceBytes(SmallPath(8)));
  ReportAttack({"batch", "a byte flipped in the cached copy of a file; bob reads it in a batch",
                "local read socket",
                "the source's bytes (the copy fails its check and is fetched again)",
                (*read)[1].value_or("") == expected ? "the source's bytes" : "other bytes"});
}

TEST_F(BatchReadTest, HostileBatchMessagesGetErrorsAndBoundNothing) {
  const int descriptors_before = OpenDescriptors(server_->pid());
  UniqueFd connection = BobsConnection();
  ASSERT_TRUE(connection.valid());
  auto exchange = [&](const v1::LocalReadRequest& request, std::span<const int> fds = {}) {
    v1::LocalReadResponse response;
    std::vector<UniqueFd> passed;
    EXPECT_TRUE(SendLocalReadMessage(connection.get(), request, fds).ok());
    absl::Status received = ReceiveLocalReadMessage(connection.get(), &response, &passed);
    EXPECT_TRUE(received.ok()) << received;
    return std::make_pair(response, passed.size());
  };

  // Garbage: an error answer, and the connection stays.
  const char garbage[] = "\xff\xff\xff\xff not a message";
  ASSERT_EQ(::send(connection.get(), garbage, sizeof(garbage), 0),
            static_cast<ssize_t>(sizeof(garbage)));
  v1::LocalReadResponse garbage_answer;
  std::vector<UniqueFd> none;
  ASSERT_TRUE(ReceiveLocalReadMessage(connection.get(), &garbage_answer, &none).ok());
  EXPECT_NE(garbage_answer.code(), 0);

  // More paths than a batch may name.
  v1::LocalReadRequest too_many;
  too_many.mutable_batch()->set_dataset("ds");
  for (size_t i = 0; i <= kMaxBatchFiles; ++i) too_many.mutable_batch()->add_paths(SmallPath(0));
  auto [too_many_answer, too_many_fds] = exchange(too_many);
  EXPECT_EQ(too_many_answer.code(), static_cast<int>(absl::StatusCode::kInvalidArgument))
      << too_many_answer.message();
  EXPECT_EQ(too_many_fds, 0u);

  // Another dataset's version, and a version of no dataset.
  v1::LocalReadRequest foreign_version;
  foreign_version.mutable_batch()->set_dataset("ds");
  foreign_version.mutable_batch()->set_dataset_version(0x1234567890abcdefULL);
  foreign_version.mutable_batch()->add_paths(SmallPath(0));
  auto [foreign_answer, foreign_fds] = exchange(foreign_version);
  EXPECT_EQ(foreign_answer.code(), static_cast<int>(absl::StatusCode::kNotFound))
      << foreign_answer.message();
  EXPECT_EQ(foreign_fds, 0u);

  // A batch with descriptors of bob's own attached (a memfd, the socket):
  // they are dropped, and the batch is served.
  int memfd = ::memfd_create("bobs", MFD_CLOEXEC);
  ASSERT_GE(memfd, 0);
  v1::LocalReadRequest with_fds;
  with_fds.mutable_batch()->set_dataset("ds");
  with_fds.mutable_batch()->add_paths(SmallPath(3));
  with_fds.mutable_batch()->set_read_through(true);
  const int attached[] = {memfd, connection.get()};
  auto [with_fds_answer, with_fds_passed] = exchange(with_fds, attached);
  EXPECT_EQ(with_fds_answer.code(), 0) << with_fds_answer.message();
  EXPECT_EQ(with_fds_passed, 1u) << with_fds_answer.DebugString();
  ::close(memfd);

  // Requests that hand out data files are granary-fuse's (root) alone.
  v1::LocalReadRequest chunk_request;
  chunk_request.mutable_key()->set_dataset_version(1);
  auto [chunk_answer, chunk_fds] = exchange(chunk_request);
  EXPECT_EQ(chunk_answer.code(), static_cast<int>(absl::StatusCode::kPermissionDenied));
  EXPECT_EQ(chunk_fds, 0u);

  // bob takes every connection he may: the next one is closed, and root
  // (granary-fuse) still reads.
  std::vector<UniqueFd> hogged;
  for (int i = 0; i < 40; ++i) hogged.push_back(BobsConnection());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  v1::LocalReadRequest batch;
  batch.mutable_batch()->set_dataset("ds");
  batch.mutable_batch()->add_paths(SmallPath(4));
  batch.mutable_batch()->set_read_through(true);
  int answered = 0;
  for (UniqueFd& hog : hogged) {
    v1::LocalReadResponse response;
    std::vector<UniqueFd> passed;
    if (SendLocalReadMessage(hog.get(), batch, {}).ok() &&
        ReceiveLocalReadMessage(hog.get(), &response, &passed).ok() && response.code() == 0) {
      ++answered;
    }
  }
  EXPECT_LE(answered, 16);
  EXPECT_GE(answered, 14);  // The first connection holds one of bob's 16.
  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> as_root =
      Client()->ReadMany("ds", std::vector<std::string>{SmallPath(5)});
  ASSERT_TRUE(as_root.ok()) << as_root.status();
  EXPECT_EQ((*as_root)[0].value_or("<error>"), SourceBytes(SmallPath(5)));
  ReportAttack({"batch",
                "bob sends garbage, 129 paths, another version, his own memfd attached, a chunk "
                "request, and opens 41 connections",
                "local read socket",
                "an error each; his descriptors dropped; 16 connections; root still served",
                absl::StrCat(answered, " of 40 extra connections answered; root read ",
                             (*as_root)[0].ok() ? "OK" : "failed")});

  hogged.clear();
  connection = UniqueFd();
  EXPECT_TRUE(ReleasedWithin(descriptors_before, std::chrono::seconds(10)));
}

TEST_F(BatchReadTest, AClientThatDiesOrNeverReadsMidBatchCostsNothingLasting) {
  std::vector<std::string> paths;
  for (int i = 0; i < static_cast<int>(kMaxBatchFiles); ++i) paths.push_back(SmallPath(i));

  // Killed with a cold batch in flight (granaryd fetching it).
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    absl::StatusOr<std::unique_ptr<GranaryClient>> client =
        GranaryClient::Connect({.socket_path = server_->socket_path()});
    if (client.ok()) (void)(*client)->ReadMany("ds", paths);
    ::_exit(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);

  // Everyone else is served meanwhile.
  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> read = ReadManyAsBob(paths);
  ASSERT_TRUE(read.ok()) << read.status();
  for (size_t i = 0; i < paths.size(); ++i) {
    ASSERT_EQ((*read)[i].value_or("<error>"), SourceBytes(paths[i])) << paths[i];
  }
  // The store keeps descriptors of the data files it read: counted from here.
  const int descriptors_before = OpenDescriptors(server_->pid());

  // A client that sends batch after batch and reads no answer: granaryd
  // keeps one answer's descriptors and then closes the connection.
  UniqueFd stalled = BobsConnection();
  v1::LocalReadRequest request;
  request.mutable_batch()->set_dataset("ds");
  request.mutable_batch()->set_read_through(true);
  for (int i = 0; i < 100; ++i) request.mutable_batch()->add_paths(SmallPath(i));
  int sent = 0;
  ::fcntl(stalled.get(), F_SETFL, O_NONBLOCK);
  for (int i = 0; i < 50; ++i) {
    if (SendLocalReadMessage(stalled.get(), request, {}).ok()) ++sent;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const int while_stalled = OpenDescriptors(server_->pid());
  EXPECT_LE(while_stalled, descriptors_before + static_cast<int>(kMaxBatchFiles) + 8)
      << "granaryd holds descriptors for a client that reads nothing";
  read = ReadManyAsBob(paths);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ((*read)[5].value_or("<error>"), SourceBytes(paths[5]));
  const bool released = ReleasedWithin(descriptors_before, std::chrono::seconds(20));
  EXPECT_TRUE(released);
  ReportAttack({"batch",
                "bob's client killed with a cold batch of 128 files in flight; another sends 50 "
                "batches and reads no answer",
                "local read socket",
                "granaryd keeps serving; one answer's descriptors at most per connection, "
                "released when the answer is not read in time",
                absl::StrCat(sent, " batches sent unread; granaryd held ",
                             while_stalled - descriptors_before, " descriptors more, ",
                             released ? "none left after the timeout" : "some left")});
}

}  // namespace
}  // namespace granary::testing
