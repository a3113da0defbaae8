#include "common/net/local_read_socket.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/base/file_util.h"
#include "common/base/status.h"
#include "common/dataset/block_checksums.h"
#include "common/dataset/hash.h"
#include "common/net/datagram_socket.h"
#include "common/net/server_address.h"

namespace granary {

std::string LocalReadSocketPath(std::string_view grpc_socket_path) {
  return std::string(grpc_socket_path) + ".local";
}

absl::Status SendLocalReadMessage(int socket, const google::protobuf::MessageLite& message,
                                  std::span<const int> passed_fds) {
  return SendDatagram(socket, message, passed_fds, "the local read socket");
}

absl::Status ReceiveLocalReadMessage(int socket, google::protobuf::MessageLite* message,
                                     std::vector<UniqueFd>* passed) {
  return ReceiveDatagram(socket, message, kMaxLocalReadMessageBytes, kMaxPassedDescriptors, passed,
                         "the local read socket");
}

absl::Status ReadVerifiedRange(int data_fd, const v1::ChunkLocation& location, const ChunkKey& key,
                               uint64_t offset, std::span<char> out) {
  const uint64_t length = location.length();
  if (offset > length || out.size() > length - offset) {
    return absl::OutOfRangeError(absl::StrCat("range [", offset, ", +", out.size(),
                                              ") is past the end of chunk ", key.ToString(), " (",
                                              length, " bytes)"));
  }
  const bool by_blocks = HasBlockChecksums(location);
  // Whole blocks, or the whole chunk when only its checksum is known.
  const CoveringBlocks covering_blocks =
      by_blocks ? BlocksCovering(location, offset, out.size())
                : CoveringBlocks{.first_block = 0, .begin = 0, .end = length};
  const uint64_t begin = covering_blocks.begin;
  const uint64_t end = covering_blocks.end;
  std::unique_ptr<char[]> staging;
  char* covering = out.data();
  if (begin != offset || end != offset + out.size()) {
    staging = std::make_unique_for_overwrite<char[]>(end - begin);
    covering = staging.get();
  }
  GRANARY_ASSIGN_OR_RETURN(
      size_t read, PreadUntilFullOrEnd(data_fd, location.offset() + begin, {covering, end - begin},
                                       absl::StrCat("reading chunk ", key.ToString())));
  if (read < end - begin) {
    return absl::DataLossError(
        absl::StrCat("the data file of chunk ", key.ToString(), " ends before the chunk does"));
  }
  const std::optional<uint64_t> mismatch =
      by_blocks ? MismatchedBlock(location, covering_blocks.first_block, covering, end - begin)
      : Xxh3(covering, length) != location.xxh3() ? std::optional<uint64_t>(0)
                                                  : std::nullopt;
  if (mismatch) {
    return absl::DataLossError(absl::StrCat("chunk ", key.ToString(),
                                            " does not match its checksum at block ", *mismatch));
  }
  if (staging != nullptr) std::memcpy(out.data(), covering + (offset - begin), out.size());
  return absl::OkStatus();
}

LocalChunkReader::~LocalChunkReader() { DropIdleConnections(); }

void LocalChunkReader::DropIdleConnections() {
  MutexLock lock(&mutex_);
  for (int socket : idle_) ::close(socket);
  idle_.clear();
}

absl::StatusOr<int> LocalChunkReader::TakeConnection(bool* kept) {
  {
    MutexLock lock(&mutex_);
    *kept = !idle_.empty() && idle_owner_ == ::getpid();
    if (*kept) {
      int socket = idle_.back();
      idle_.pop_back();
      return socket;
    }
  }
  GRANARY_ASSIGN_OR_RETURN(sockaddr_un address, UnixSocketAddress(socket_path_));
  // Non-blocking: a Unix socket whose backlog is full (a granaryd that stopped
  // accepting) makes connect() fail with EAGAIN at once instead of blocking.
  int socket = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (socket < 0) return ErrnoStatus(errno, "creating a local read socket");
  auto fail = [&](const std::string& what) {
    int error = errno;
    ::close(socket);
    return absl::UnavailableError(
        absl::StrCat(what, " ", socket_path_, ": ", std::strerror(error)));
  };
  if (::connect(socket, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    return fail("cannot connect to");
  }
  // Requests and answers then block, each for timeout_ at most.
  timeval timeout{};
  timeout.tv_sec = timeout_.count() / 1000;
  timeout.tv_usec = (timeout_.count() % 1000) * 1000;
  if (::fcntl(socket, F_SETFL, 0) != 0 ||
      ::setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)) != 0 ||
      ::setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout)) != 0) {
    return fail("cannot set the timeouts of a connection to");
  }
  return socket;
}

void LocalChunkReader::KeepConnection(int socket) {
  MutexLock lock(&mutex_);
  if (idle_owner_ != ::getpid()) {
    // Descriptors a forked child shares with its parent: the child's copies
    // are closed, the parent's stay.
    for (int inherited : idle_) ::close(inherited);
    idle_.clear();
    idle_owner_ = ::getpid();
  }
  idle_.push_back(socket);
}

absl::StatusOr<LocalChunkReader::Answer> LocalChunkReader::Exchange(
    const v1::LocalReadRequest& request) {
  // A kept connection that fails was most likely cut by a granaryd restart:
  // every kept one is then as dead, and a new one gets the answer.
  for (;;) {
    bool kept = false;
    GRANARY_ASSIGN_OR_RETURN(int socket, TakeConnection(&kept));
    Answer answer;
    absl::Status exchanged = SendLocalReadMessage(socket, request, {});
    if (exchanged.ok()) exchanged = ReceiveLocalReadMessage(socket, &answer.response, &answer.fds);
    if (exchanged.ok()) {
      KeepConnection(socket);
      if (answer.response.code() != 0) {
        return absl::Status(static_cast<absl::StatusCode>(answer.response.code()),
                            answer.response.message());
      }
      return answer;
    }
    ::close(socket);  // It may hold half an answer.
    DropIdleConnections();
    if (!kept) return exchanged;
  }
}

absl::StatusOr<LocalChunkReader::Extent> LocalChunkReader::Locate(const ChunkKey& key,
                                                                  uint64_t read_bytes) {
  v1::LocalReadRequest request;
  key.ToProto(request.mutable_key());
  request.set_read_bytes(read_bytes);
  GRANARY_ASSIGN_OR_RETURN(Answer answer, Exchange(request));
  if (answer.fds.size() != 1) {
    return absl::InternalError("the local read answer for " + key.ToString() + " had no data file");
  }
  return Extent{std::move(answer.fds.front()), std::move(*answer.response.mutable_location())};
}

absl::StatusOr<LocalChunkReader::WholeFile> LocalChunkReader::OpenWholeFile(
    const ChunkKey& key, uint64_t size, uint32_t chunk_size, WholeFileFetch fetch,
    std::span<const AheadFile> ahead, std::vector<AheadWholeFile>* ahead_held) {
  v1::LocalReadRequest request;
  key.ToProto(request.mutable_key());
  v1::WholeFileRequest* whole = request.mutable_whole_file();
  whole->set_size(size);
  whole->set_chunk_size(chunk_size);
  whole->set_read_through(fetch != WholeFileFetch::kHeldOnly);
  whole->set_in_memory_ok(fetch == WholeFileFetch::kReadThroughInMemory);
  for (const AheadFile& file : ahead.first(std::min(ahead.size(), kMaxAheadFiles))) {
    v1::AheadFile* asked = whole->add_ahead();
    asked->set_file_id(file.file_id);
    asked->set_size(file.size);
  }
  GRANARY_ASSIGN_OR_RETURN(Answer answer, Exchange(request));
  const v1::WholeFileAnswer& answered = answer.response.whole_file();
  if (answer.fds.size() != 1 + static_cast<size_t>(answered.ahead_size())) {
    return absl::InternalError(absl::StrCat("the whole-file answer for ", key.ToString(), " had ",
                                            answer.fds.size(), " descriptors, not ",
                                            1 + answered.ahead_size()));
  }
  if (ahead_held != nullptr) {
    for (int i = 0; i < answered.ahead_size(); ++i) {
      ahead_held->push_back(
          {answered.ahead(i).file_id(),
           {std::move(answer.fds[1 + i]), answered.ahead(i).verified_ctime_ns()}});
    }
  }
  return WholeFile{std::move(answer.fds.front()), answered.verified_ctime_ns(),
                   answered.in_memory()};
}

absl::StatusOr<v1::WithdrawnFiles> LocalChunkReader::ReportUses(const v1::UseReport& report) {
  v1::LocalReadRequest request;
  *request.mutable_uses() = report;
  GRANARY_ASSIGN_OR_RETURN(Answer answer, Exchange(request));
  return std::move(*answer.response.mutable_withdrawn());
}

absl::Status LocalChunkReader::Read(const ChunkKey& key, uint32_t offset_in_chunk,
                                    std::span<char> out) {
  GRANARY_ASSIGN_OR_RETURN(Extent extent, Locate(key, out.size()));
  return ReadVerifiedRange(extent.fd.get(), extent.location, key, offset_in_chunk, out);
}

absl::StatusOr<LocalChunkReader::Batch> LocalChunkReader::ReadBatch(
    const v1::BatchRequest& request) {
  v1::LocalReadRequest wrapped;
  *wrapped.mutable_batch() = request;
  GRANARY_ASSIGN_OR_RETURN(Answer answer, Exchange(wrapped));
  Batch batch{std::move(*answer.response.mutable_batch()), std::move(answer.fds)};
  size_t handed = 0;
  for (const v1::BatchFile& file : batch.answer.files()) {
    handed += file.code() == 0 && file.size() > 0 ? 1 : 0;
  }
  if (batch.answer.files_size() != request.paths_size() || handed != batch.fds.size()) {
    return absl::InternalError(absl::StrCat("the answer to a batch of ", request.paths_size(),
                                            " files had ", batch.answer.files_size(), " files and ",
                                            batch.fds.size(), " descriptors, not ", handed));
  }
  return batch;
}

}  // namespace granary
