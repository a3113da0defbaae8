#include "fuse_client/kernel/mount_device.h"

#include <fstream>
#include <sstream>

namespace granary::fuse {

std::optional<std::string> MountDevice(const std::string& mountpoint) {
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::string line;
  std::optional<std::string> device;
  while (std::getline(mountinfo, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    fields >> id >> parent >> dev >> root >> point;
    if (point == mountpoint) device = dev;  // Mounts stacked later are listed later.
  }
  return device;
}

}  // namespace granary::fuse
