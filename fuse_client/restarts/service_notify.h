// Tells a service manager (systemd, Type=notify) that granary-fuse is
// serving its mount, and that the process doing so is the service's main
// process: after `systemctl reload` runs `granary-fuse --takeover`, the new
// process is the one systemd must watch and restart, not the one that left.
// Without $NOTIFY_SOCKET it does nothing.
//
// Thread-safety: a plain function.
#ifndef GRANARY_FUSE_CLIENT_RESTARTS_SERVICE_NOTIFY_H_
#define GRANARY_FUSE_CLIENT_RESTARTS_SERVICE_NOTIFY_H_

namespace granary::fuse {

void NotifyServiceManagerReady();

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_RESTARTS_SERVICE_NOTIFY_H_
