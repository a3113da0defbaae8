#include "fuse_client/restarts/open_journal.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/base/memory_file.h"
#include "common/base/status.h"

namespace granary::fuse {
namespace {

// The start of the shared memory. Each index on a cache line of its own: the
// server writes `tail`, the keeper `head`.
struct RingHeader {
  alignas(64) uint64_t head;  // Records the keeper has taken.
  alignas(64) uint64_t tail;  // Records the server has appended.
};
static_assert(std::atomic_ref<uint64_t>::is_always_lock_free,
              "the indices are shared by two processes");

}  // namespace

class OpenRing {
 public:
  // Maps `bytes` of memfd `fd` shared.
  static absl::StatusOr<std::unique_ptr<OpenRing>> Map(int fd, size_t bytes) {
    void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) return ErrnoStatus(errno, "mapping the open journal");
    return std::unique_ptr<OpenRing>(new OpenRing(base, bytes));
  }
  ~OpenRing() { ::munmap(base_, bytes_); }

  std::atomic_ref<uint64_t> head() { return std::atomic_ref<uint64_t>(header()->head); }
  std::atomic_ref<uint64_t> tail() { return std::atomic_ref<uint64_t>(header()->tail); }
  OpenRecord& record(uint64_t index) { return records()[index % capacity_]; }
  uint64_t capacity() const { return capacity_; }

 private:
  OpenRing(void* base, size_t bytes)
      : base_(base), bytes_(bytes), capacity_((bytes - sizeof(RingHeader)) / sizeof(OpenRecord)) {}
  RingHeader* header() { return static_cast<RingHeader*>(base_); }
  OpenRecord* records() {
    return reinterpret_cast<OpenRecord*>(static_cast<char*>(base_) + sizeof(RingHeader));
  }

  void* const base_;
  const size_t bytes_;
  const uint64_t capacity_;
};

absl::StatusOr<std::unique_ptr<OpenJournalWriter>> OpenJournalWriter::Create(size_t capacity) {
  const size_t bytes = sizeof(RingHeader) + capacity * sizeof(OpenRecord);
  GRANARY_ASSIGN_OR_RETURN(MemoryFile memory, MemoryFile::Create("granary-open-journal", bytes));
  // The keeper maps it too: a size that cannot change never faults there.
  GRANARY_RETURN_IF_ERROR(memory.Seal(MemoryFile::kFixedSize));
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<OpenRing> ring, OpenRing::Map(memory.fd(), bytes));
  return std::unique_ptr<OpenJournalWriter>(
      new OpenJournalWriter(std::move(memory).Release(), std::move(ring)));
}

OpenJournalWriter::OpenJournalWriter(UniqueFd fd, std::unique_ptr<OpenRing> ring)
    : fd_(std::move(fd)), ring_(std::move(ring)) {}

OpenJournalWriter::~OpenJournalWriter() = default;

OpenJournalWriter::Appended OpenJournalWriter::Append(const OpenRecord& record) {
  MutexLock lock(&mutex_);
  const uint64_t tail = ring_->tail().load(std::memory_order_relaxed);
  const uint64_t used = tail - ring_->head().load(std::memory_order_acquire);
  if (used >= ring_->capacity()) return Appended::kFull;
  ring_->record(tail) = record;
  // The record is in place before the keeper can see the tail that covers it.
  ring_->tail().store(tail + 1, std::memory_order_release);
  return used + 1 == ring_->capacity() / 2 ? Appended::kHalfFull : Appended::kYes;
}

absl::StatusOr<std::unique_ptr<OpenJournalReader>> OpenJournalReader::Map(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, "fstat of the open journal");
  const size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes < sizeof(RingHeader) + 2 * sizeof(OpenRecord)) {
    return absl::InvalidArgumentError(
        absl::StrCat("an open journal of ", bytes, " bytes holds no ring"));
  }
  if (!MemoryFile::HasSeals(fd, MemoryFile::kFixedSize)) {
    return absl::InvalidArgumentError("an open journal whose size may change");
  }
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<OpenRing> ring, OpenRing::Map(fd, bytes));
  return std::unique_ptr<OpenJournalReader>(new OpenJournalReader(std::move(ring)));
}

OpenJournalReader::OpenJournalReader(std::unique_ptr<OpenRing> ring) : ring_(std::move(ring)) {}

OpenJournalReader::~OpenJournalReader() = default;

void OpenJournalReader::Drain(const std::function<void(const OpenRecord&)>& take) {
  uint64_t head = ring_->head().load(std::memory_order_relaxed);
  const uint64_t tail = ring_->tail().load(std::memory_order_acquire);
  if (tail - head > ring_->capacity()) head = tail - ring_->capacity();
  for (; head != tail; ++head) take(OpenRecord(ring_->record(head)));
  ring_->head().store(tail, std::memory_order_release);
}

}  // namespace granary::fuse
