// The CSI v1 services of granary-csi, a node plugin for static, read-only
// volumes: Identity (who the plugin is, whether it is ready) and Node
// (publish a dataset into a pod's target directory, unpublish it, report
// its size, the node's id and cache group). There is no Controller service:
// PersistentVolumes are made by hand, naming a dataset, and need no attach
// (the CSIDriver object says attachRequired: false).
//
// The node's cache group is reported as the topology segment
// kGroupTopologyKey, so PersistentVolumes can carry node affinity by group.
// The granaryd answering `datasets` gives sizes and current versions; each
// dataset published is handed to the prewarmer, if there is one; each
// volume unpublished ends its pod's job, which keeps its receipt (PodJobs).
//
// Thread-safety: the services are called from gRPC's threads concurrently;
// two calls for one volume at once get ABORTED for the second, as the CSI
// specification allows.
#ifndef GRANARY_CSI_CSI_SERVICES_H_
#define GRANARY_CSI_CSI_SERVICES_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "client/dataset_client.h"
#include "common/base/mutex.h"
#include "common/scheduling/kubernetes_names.h"
#include "common/scheduling/prewarm_queue.h"
#include "csi/dataset_mounts.h"
#include "csi/pod_jobs.h"
#include "csi/proto/csi.grpc.pb.h"

namespace granary::csi_driver {

class IdentityService final : public csi::v1::Identity::Service {
 public:
  // `mounts` must outlive the service.
  explicit IdentityService(const DatasetMounts* mounts);

  grpc::Status GetPluginInfo(grpc::ServerContext* context,
                             const csi::v1::GetPluginInfoRequest* request,
                             csi::v1::GetPluginInfoResponse* response) override;
  grpc::Status GetPluginCapabilities(grpc::ServerContext* context,
                                     const csi::v1::GetPluginCapabilitiesRequest* request,
                                     csi::v1::GetPluginCapabilitiesResponse* response) override;
  // Ready once granary-fuse serves at the mount; FAILED_PRECONDITION, saying
  // why, otherwise.
  grpc::Status Probe(grpc::ServerContext* context, const csi::v1::ProbeRequest* request,
                     csi::v1::ProbeResponse* response) override;

 private:
  const DatasetMounts* mounts_;
};

class NodeService final : public csi::v1::Node::Service {
 public:
  struct Node {
    std::string id;
    std::string group;
  };
  // `mounts`, `datasets`, `prewarmer` (may be null: no prewarm) and
  // `pod_jobs` (may be null: no receipts) must outlive the service.
  NodeService(Node node, const DatasetMounts* mounts, const DatasetClient* datasets,
              PrewarmQueue* prewarmer, const PodJobs* pod_jobs);

  grpc::Status NodePublishVolume(grpc::ServerContext* context,
                                 const csi::v1::NodePublishVolumeRequest* request,
                                 csi::v1::NodePublishVolumeResponse* response) override;
  grpc::Status NodeUnpublishVolume(grpc::ServerContext* context,
                                   const csi::v1::NodeUnpublishVolumeRequest* request,
                                   csi::v1::NodeUnpublishVolumeResponse* response) override;
  // The dataset's bytes and its files and directories (used = total,
  // nothing available: a dataset is read-only).
  grpc::Status NodeGetVolumeStats(grpc::ServerContext* context,
                                  const csi::v1::NodeGetVolumeStatsRequest* request,
                                  csi::v1::NodeGetVolumeStatsResponse* response) override;
  grpc::Status NodeGetCapabilities(grpc::ServerContext* context,
                                   const csi::v1::NodeGetCapabilitiesRequest* request,
                                   csi::v1::NodeGetCapabilitiesResponse* response) override;
  grpc::Status NodeGetInfo(grpc::ServerContext* context, const csi::v1::NodeGetInfoRequest* request,
                           csi::v1::NodeGetInfoResponse* response) override;

 private:
  // Marks `volume_id` busy until destroyed; ABORTED (in status()) if it was.
  class VolumeOperation {
   public:
    VolumeOperation(NodeService* service, std::string volume_id);
    ~VolumeOperation();
    VolumeOperation(const VolumeOperation&) = delete;
    VolumeOperation& operator=(const VolumeOperation&) = delete;
    const absl::Status& status() const { return status_; }

   private:
    NodeService* service_;
    std::string volume_id_;
    absl::Status status_;
  };

  absl::Status Publish(const csi::v1::NodePublishVolumeRequest& request);
  // What granaryd says of dataset `name`; NOT_FOUND if it has none.
  absl::StatusOr<granary::v1::DatasetInfo> Dataset(const std::string& name) const;

  Node node_;
  const DatasetMounts* mounts_;
  const DatasetClient* datasets_;
  PrewarmQueue* prewarmer_;
  const PodJobs* pod_jobs_;
  Mutex mutex_;
  absl::flat_hash_set<std::string> busy_volumes_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace granary::csi_driver

#endif  // GRANARY_CSI_CSI_SERVICES_H_
