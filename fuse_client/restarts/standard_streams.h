// Points a detaching process's standard streams away from the terminal it
// leaves: stdin and stdout at /dev/null, stderr (where Granary logs) at
// `stderr_path` when one is given, else left as it is.
//
// Thread-safety: a plain function; call it while no other thread writes to
// the streams.
#ifndef GRANARY_FUSE_CLIENT_RESTARTS_STANDARD_STREAMS_H_
#define GRANARY_FUSE_CLIENT_RESTARTS_STANDARD_STREAMS_H_

#include <string>

namespace granary::fuse {

void RedirectStandardStreams(const std::string& stderr_path);

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_RESTARTS_STANDARD_STREAMS_H_
