// GranaryServer is one running granaryd node, assembled from its
// configuration: the data-directory lock, the chunk store on the cache
// directories, the catalog, the read path, the gRPC service on a Unix socket
// (local clients) and TCP (peers), and the Prometheus endpoint.
//
// Start() fails, having released everything, with an error naming the problem:
// a data directory in use by another granaryd, a cache directory that cannot be
// used, an address that cannot be bound, a socket another server answers on.
//
// Thread-safety: Shutdown() may be called from any one thread.
#ifndef GRANARY_CACHE_SERVER_SERVER_H_
#define GRANARY_CACHE_SERVER_SERVER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "cache_server/config/config.h"

namespace granary {

class GranaryServer {
 public:
  static absl::StatusOr<std::unique_ptr<GranaryServer>> Start(const GranarydConfig& config);
  // Shuts down if still running.
  ~GranaryServer();
  GranaryServer(const GranaryServer&) = delete;
  GranaryServer& operator=(const GranaryServer&) = delete;

  // Stops accepting calls, cancels the ones still running after a short grace
  // period (prewarms stop their workers), and closes the store and catalog.
  void Shutdown();

 private:
  struct Parts;
  explicit GranaryServer(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_SERVER_H_
