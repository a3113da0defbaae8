// SilentListener accepts TCP connections on a loopback port and never answers
// on them: a peer or endpoint that is up but stalled (a stopped process, a
// hung server), which connection timeouts alone do not catch; or, asked to
// close them, one that goes away as soon as it is reached.
//
// Thread-safety: a thread of its own accepts; connections() may be read from
// any thread. The destructor stops it and closes every connection.
#ifndef GRANARY_TESTS_SUPPORT_SILENT_LISTENER_H_
#define GRANARY_TESTS_SUPPORT_SILENT_LISTENER_H_

#include <atomic>
#include <thread>
#include <vector>

namespace granary::testing {

class SilentListener {
 public:
  enum class Accepted { kHeld, kClosed };
  // Listens on 127.0.0.1:`port`; listening() says whether it could. Accepted
  // connections are held open until the destructor, or closed at once.
  explicit SilentListener(int port, Accepted accepted = Accepted::kHeld);
  ~SilentListener();
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;

  bool listening() const { return listening_; }
  // Connections accepted so far.
  int connections() const { return connections_.load(); }

 private:
  void AcceptUntilStopped();

  const int fd_;
  const Accepted accepted_mode_;
  bool listening_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::vector<int> accepted_;  // Touched by the accepting thread alone until it is joined.
  std::thread thread_;
};

}  // namespace granary::testing

#endif  // GRANARY_TESTS_SUPPORT_SILENT_LISTENER_H_
