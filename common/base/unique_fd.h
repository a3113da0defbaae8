// UniqueFd owns one file descriptor and closes it when destroyed, so that a
// descriptor handed across a function boundary (in an absl::StatusOr) cannot
// leak on an early return.
//
// Thread-safety: like an int; one object is not shared between threads while
// it is moved or reset.
#ifndef GRANARY_COMMON_BASE_UNIQUE_FD_H_
#define GRANARY_COMMON_BASE_UNIQUE_FD_H_

#include <unistd.h>

#include <utility>

namespace granary {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives the descriptor up to the caller, who closes it.
  int Release() { return std::exchange(fd_, -1); }

 private:
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  int fd_ = -1;
};

}  // namespace granary

#endif  // GRANARY_COMMON_BASE_UNIQUE_FD_H_
