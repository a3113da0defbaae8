// Where the embedded default single-node cache lives, so that `granaryd` with no
// arguments and `granary` with no --server find each other.
//
//   data directory: /var/lib/granary as root, else $XDG_STATE_HOME/granary
//                   (~/.local/state/granary)
//   Unix socket:    /run/granary/granaryd.sock as root, else
//                   $XDG_RUNTIME_DIR/granary/granaryd.sock (/tmp/granary-<uid>/...)
//   TCP (peers):    127.0.0.1:7070;  metrics (Prometheus): 127.0.0.1:7071
//   cache group:    "default", for a node that names none
//
// Thread-safety: pure functions of the environment.
#ifndef GRANARY_COMMON_NET_DEFAULTS_H_
#define GRANARY_COMMON_NET_DEFAULTS_H_

#include <string>

namespace granary {

inline constexpr char kDefaultListenAddress[] = "127.0.0.1:7070";
inline constexpr char kDefaultMetricsAddress[] = "127.0.0.1:7071";
inline constexpr char kDefaultGroup[] = "default";

std::string DefaultDataDir();
std::string DefaultSocketPath();

// Where a client of granaryd (the CLI, libgranary, the Python package) finds
// it when it names none: $GRANARY_SOCKET; else the socket of the caller's
// own granaryd (DefaultSocketPath()) when it exists; else the node's
// granaryd (kNodeSocketPath) when its socket exists, whoever the caller is;
// else DefaultSocketPath(), which a failed call then names.
inline constexpr char kNodeSocketPath[] = "/run/granary/granaryd.sock";
std::string DefaultClientSocketPath();

}  // namespace granary

#endif  // GRANARY_COMMON_NET_DEFAULTS_H_
