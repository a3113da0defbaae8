#include "csi/volume_request.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/absl_compat.h"
#include "common/base/printable.h"
#include "common/base/status.h"
#include "common/dataset/chunk_key.h"

namespace granary::csi_driver {
namespace {

// Kubernetes adds these keys itself (pod information, ephemeral volumes).
constexpr char kKubernetesKeyPrefix[] = "csi.storage.k8s.io/";

absl::Status CheckDatasetName(std::string_view name) {
  if (name.empty()) {
    return absl::InvalidArgumentError(
        "volumeAttributes: \"dataset\" is required (the name of a registered dataset)");
  }
  if (name == "." || name == ".." || name.find('/') != std::string_view::npos ||
      name.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("volumeAttributes: dataset '", Printable(name),
                     "' is not a dataset name (one directory of the granary-fuse mount)"));
  }
  return absl::OkStatus();
}

bool IsReaderOnly(csi::v1::VolumeCapability::AccessMode::Mode mode) {
  return mode == csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_READER_ONLY ||
         mode == csi::v1::VolumeCapability::AccessMode::MULTI_NODE_READER_ONLY;
}

}  // namespace

absl::StatusOr<DatasetVolume> ParseVolumeContext(
    const google::protobuf::Map<std::string, std::string>& volume_context) {
  DatasetVolume volume;
  for (const auto& [key, value] : volume_context) {
    if (key == kDatasetAttribute) {
      volume.dataset = value;
    } else if (key == kVersionAttribute) {
      absl::StatusOr<uint64_t> version = ParseVersion(value);
      if (!version.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "volumeAttributes: version '", Printable(value), "': ", version.status().message()));
      }
      volume.version = *version;
    } else if (!absl::StartsWith(key, kKubernetesKeyPrefix)) {
      return absl::InvalidArgumentError(
          absl::StrCat("volumeAttributes: unknown key '", Printable(key),
                       "' (known: ", kDatasetAttribute, ", ", kVersionAttribute, ")"));
    }
  }
  if (absl::Status name = CheckDatasetName(volume.dataset); !name.ok()) return name;
  return volume;
}

absl::Status CheckReadOnlyCapability(const csi::v1::VolumeCapability& capability) {
  if (capability.has_block()) {
    return absl::FailedPreconditionError(
        "volume_capability: block volumes are not supported; a dataset is a mounted directory");
  }
  if (!capability.has_mount()) {
    return absl::InvalidArgumentError("volume_capability: access_type (mount) is required");
  }
  for (const std::string& flag : capability.mount().mount_flags()) {
    if (flag != "ro") {
      return absl::InvalidArgumentError(
          absl::StrCat("volume_capability: mount flag '", Printable(flag),
                       "' is not supported (datasets are bind-mounted read-only, "
                       "nosuid, nodev; only \"ro\" may be given)"));
    }
  }
  if (!capability.has_access_mode() ||
      capability.access_mode().mode() == csi::v1::VolumeCapability::AccessMode::UNKNOWN) {
    return absl::InvalidArgumentError("volume_capability: access_mode is required");
  }
  csi::v1::VolumeCapability::AccessMode::Mode mode = capability.access_mode().mode();
  if (!IsReaderOnly(mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "volume_capability: access mode ", csi::v1::VolumeCapability::AccessMode::Mode_Name(mode),
        " writes, and datasets are read-only (use accessModes: [ReadOnlyMany])"));
  }
  return absl::OkStatus();
}

absl::Status CheckAbsolutePath(std::string_view field, std::string_view path) {
  GRANARY_RETURN_IF_ERROR(CheckRequired(field, path));
  bool ok = path.front() == '/' && path.find('\0') == std::string_view::npos;
  for (absl::string_view part : absl::StrSplit(AsAbsl(path), '/')) {
    ok = ok && part != "." && part != "..";
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(AsAbsl(field), " '", Printable(path),
                   "' must be an absolute path without '.' or '..' parts"));
}

absl::Status CheckRequired(std::string_view field, std::string_view value) {
  if (!value.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(AsAbsl(field), " is required"));
}

}  // namespace granary::csi_driver
