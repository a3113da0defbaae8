// What a CSI request asks granary-csi to publish, checked before anything is
// mounted: the dataset a PersistentVolume's volumeAttributes name (and the
// version it may pin), and a volume capability granary-csi can honour
// (mounted, read-only). Every refusal names the field and what is wrong, with
// the gRPC code the CSI specification gives the condition.
//
// Thread-safety: pure functions.
#ifndef GRANARY_CSI_VOLUME_REQUEST_H_
#define GRANARY_CSI_VOLUME_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/scheduling/kubernetes_names.h"
#include "csi/proto/csi.pb.h"
#include "google/protobuf/map.h"

namespace granary::csi_driver {

// The volumeAttributes keys granary-csi reads: kDatasetAttribute
// (common/scheduling/kubernetes_names.h) and this one.
inline constexpr char kVersionAttribute[] = "version";

struct DatasetVolume {
  std::string dataset;
  // Publish only while this version is the dataset's current one.
  std::optional<uint64_t> version;
};

// The dataset named by `volume_context`: INVALID_ARGUMENT when "dataset" is
// missing or is not a single directory name, when "version" is not a version
// as `granary dataset show` prints it, or when a key is neither of them (a
// misspelt key would otherwise be ignored). Keys Kubernetes itself adds
// (csi.storage.k8s.io/...) are allowed.
absl::StatusOr<DatasetVolume> ParseVolumeContext(
    const google::protobuf::Map<std::string, std::string>& volume_context);

// OK for a mount volume with a reader-only access mode and no mount flags
// but "ro"; INVALID_ARGUMENT when the capability or its access mode is
// missing or a mount flag is unknown; FAILED_PRECONDITION ("exceeds
// capabilities") for a block volume or an access mode that writes.
absl::Status CheckReadOnlyCapability(const csi::v1::VolumeCapability& capability);

// INVALID_ARGUMENT naming `field` unless `path` is absolute, holds no NUL and
// has no "." or ".." component.
absl::Status CheckAbsolutePath(std::string_view field, std::string_view path);

// INVALID_ARGUMENT naming `field` if `value` is empty.
absl::Status CheckRequired(std::string_view field, std::string_view value);

}  // namespace granary::csi_driver

#endif  // GRANARY_CSI_VOLUME_REQUEST_H_
