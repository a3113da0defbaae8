#include "csi/csi_services.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/printable.h"
#include "common/base/status.h"
#include "common/dataset/chunk_key.h"
#include "csi/volume_request.h"

namespace granary::csi_driver {
namespace {

grpc::Status Reply(const absl::Status& status) { return ToGrpcStatus(status); }

void AddUsage(csi::v1::NodeGetVolumeStatsResponse* response, csi::v1::VolumeUsage::Unit unit,
              uint64_t count) {
  csi::v1::VolumeUsage* usage = response->add_usage();
  usage->set_unit(unit);
  usage->set_total(static_cast<int64_t>(count));
  usage->set_used(static_cast<int64_t>(count));
  usage->set_available(0);
}

}  // namespace

IdentityService::IdentityService(const DatasetMounts* mounts) : mounts_(mounts) {}

grpc::Status IdentityService::GetPluginInfo(grpc::ServerContext*,
                                            const csi::v1::GetPluginInfoRequest*,
                                            csi::v1::GetPluginInfoResponse* response) {
  response->set_name(kDriverName);
  response->set_vendor_version(GRANARY_VERSION);
  return grpc::Status::OK;
}

grpc::Status IdentityService::GetPluginCapabilities(
    grpc::ServerContext*, const csi::v1::GetPluginCapabilitiesRequest*,
    csi::v1::GetPluginCapabilitiesResponse* response) {
  // NodeGetInfo reports the cache group as topology, which the specification
  // allows only with this capability.
  response->add_capabilities()->mutable_service()->set_type(
      csi::v1::PluginCapability::Service::VOLUME_ACCESSIBILITY_CONSTRAINTS);
  return grpc::Status::OK;
}

grpc::Status IdentityService::Probe(grpc::ServerContext*, const csi::v1::ProbeRequest*,
                                    csi::v1::ProbeResponse* response) {
  if (absl::Status serving = mounts_->CheckServing(); !serving.ok()) {
    return Reply(absl::FailedPreconditionError(serving.message()));
  }
  response->mutable_ready()->set_value(true);
  return grpc::Status::OK;
}

NodeService::VolumeOperation::VolumeOperation(NodeService* service, std::string volume_id)
    : service_(service), volume_id_(std::move(volume_id)) {
  MutexLock lock(&service_->mutex_);
  if (!service_->busy_volumes_.insert(volume_id_).second) {
    status_ = absl::AbortedError(
        absl::StrCat("an operation on volume ", Printable(volume_id_), " is already in progress"));
  }
}

NodeService::VolumeOperation::~VolumeOperation() {
  if (!status_.ok()) return;
  MutexLock lock(&service_->mutex_);
  service_->busy_volumes_.erase(volume_id_);
}

NodeService::NodeService(Node node, const DatasetMounts* mounts, const DatasetClient* datasets,
                         PrewarmQueue* prewarmer, const PodJobs* pod_jobs)
    : node_(std::move(node)),
      mounts_(mounts),
      datasets_(datasets),
      prewarmer_(prewarmer),
      pod_jobs_(pod_jobs) {}

absl::StatusOr<granary::v1::DatasetInfo> NodeService::Dataset(const std::string& name) const {
  GRANARY_ASSIGN_OR_RETURN(std::vector<granary::v1::DatasetInfo> all, datasets_->ListDatasets());
  for (granary::v1::DatasetInfo& info : all) {
    if (info.name() == name) return std::move(info);
  }
  return absl::NotFoundError(absl::StrCat("dataset '", Printable(name), "' is not registered"));
}

absl::Status NodeService::Publish(const csi::v1::NodePublishVolumeRequest& request) {
  GRANARY_RETURN_IF_ERROR(CheckRequired("volume_id", request.volume_id()));
  GRANARY_RETURN_IF_ERROR(CheckAbsolutePath("target_path", request.target_path()));
  if (!request.has_volume_capability()) {
    return absl::InvalidArgumentError("volume_capability is required");
  }
  GRANARY_RETURN_IF_ERROR(CheckReadOnlyCapability(request.volume_capability()));
  GRANARY_ASSIGN_OR_RETURN(DatasetVolume volume, ParseVolumeContext(request.volume_context()));
  if (volume.version) {
    GRANARY_ASSIGN_OR_RETURN(granary::v1::DatasetInfo info, Dataset(volume.dataset));
    if (info.version() != *volume.version) {
      return absl::NotFoundError(absl::StrCat(
          "dataset '", volume.dataset, "' is at version ", FormatVersion(info.version()),
          ", not the version ", FormatVersion(*volume.version),
          " the volume names (the mount serves current versions only)"));
    }
  }
  GRANARY_RETURN_IF_ERROR(mounts_->Publish(volume.dataset, request.target_path()));
  if (prewarmer_ != nullptr) prewarmer_->Warm(volume.dataset);
  return absl::OkStatus();
}

grpc::Status NodeService::NodePublishVolume(grpc::ServerContext*,
                                            const csi::v1::NodePublishVolumeRequest* request,
                                            csi::v1::NodePublishVolumeResponse*) {
  VolumeOperation operation(this, request->volume_id());
  if (!operation.status().ok()) return Reply(operation.status());
  return Reply(Publish(*request));
}

grpc::Status NodeService::NodeUnpublishVolume(grpc::ServerContext*,
                                              const csi::v1::NodeUnpublishVolumeRequest* request,
                                              csi::v1::NodeUnpublishVolumeResponse*) {
  absl::Status valid = CheckRequired("volume_id", request->volume_id());
  if (valid.ok()) valid = CheckAbsolutePath("target_path", request->target_path());
  if (!valid.ok()) return Reply(valid);
  VolumeOperation operation(this, request->volume_id());
  if (!operation.status().ok()) return Reply(operation.status());
  absl::Status unpublished = mounts_->Unpublish(request->target_path());
  if (unpublished.ok() && pod_jobs_ != nullptr) pod_jobs_->Unpublished(request->target_path());
  return Reply(unpublished);
}

grpc::Status NodeService::NodeGetVolumeStats(grpc::ServerContext*,
                                             const csi::v1::NodeGetVolumeStatsRequest* request,
                                             csi::v1::NodeGetVolumeStatsResponse* response) {
  absl::Status valid = CheckRequired("volume_id", request->volume_id());
  if (valid.ok()) valid = CheckAbsolutePath("volume_path", request->volume_path());
  if (!valid.ok()) return Reply(valid);
  absl::StatusOr<std::string> dataset = mounts_->PublishedDataset(request->volume_path());
  if (!dataset.ok()) return Reply(dataset.status());
  absl::StatusOr<granary::v1::DatasetInfo> info = Dataset(*dataset);
  if (!info.ok()) return Reply(info.status());
  AddUsage(response, csi::v1::VolumeUsage::BYTES, info->total_bytes());
  AddUsage(response, csi::v1::VolumeUsage::INODES, info->file_count() + info->directory_count());
  return grpc::Status::OK;
}

grpc::Status NodeService::NodeGetCapabilities(grpc::ServerContext*,
                                              const csi::v1::NodeGetCapabilitiesRequest*,
                                              csi::v1::NodeGetCapabilitiesResponse* response) {
  response->add_capabilities()->mutable_rpc()->set_type(
      csi::v1::NodeServiceCapability::RPC::GET_VOLUME_STATS);
  return grpc::Status::OK;
}

grpc::Status NodeService::NodeGetInfo(grpc::ServerContext*, const csi::v1::NodeGetInfoRequest*,
                                      csi::v1::NodeGetInfoResponse* response) {
  response->set_node_id(node_.id);
  (*response->mutable_accessible_topology()->mutable_segments())[kGroupTopologyKey] = node_.group;
  return grpc::Status::OK;
}

}  // namespace granary::csi_driver
