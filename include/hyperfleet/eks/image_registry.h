#pragma once
// eks::ImageRegistry: the local OCI registry EKS nodes pull images from (Debian's
// docker-registry, the CNCF distribution registry), run by the server as a child it restarts,
// listening on the host's addresses on one port, its storage under the data dir.
// docs/kubernetes.md "Registry and images".
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "hyperfleet/common/status.h"

namespace hf::eks {

/// The registry's port unless --registry-port says otherwise (kind's local-registry port).
inline constexpr uint16_t kDefaultRegistryPort = 5000;

/// How ImageRegistry::Start runs the registry.
struct ImageRegistryOptions {
  /// <data-dir>/registry: config.yml, storage/ (the blobs), registry.log, registry.pid.
  std::string dir;
  uint16_t port = kDefaultRegistryPort;  ///< TCP port on every host address (0.0.0.0)
  /// The program; "": FindProgram("docker-registry").
  std::string binary;
  /// Restart delay after an early exit: doubles per failure up to max_backoff_ms; a run of
  /// 60 s resets it.
  int first_backoff_ms = 1000;
  int max_backoff_ms = 30000;
};

/// The config.yml docker-registry is given (pure): filesystem storage at `storage_dir`,
/// deletes enabled, plain HTTP on 0.0.0.0:`port`, no access log.
std::string RegistryConfig(const std::string& storage_dir, uint16_t port);

/// A running registry. Destroying it stops the registry (SIGTERM, SIGKILL after 5 s).
class ImageRegistry {
 public:
  /// Writes config.yml, ends a registry a previous server left running on the same dir
  /// (registry.pid whose command line names this config), and starts docker-registry under
  /// a thread that restarts it when it ends. Errors: NotFound when docker-registry is not
  /// installed; FailedPrecondition when `port` is already taken on this host (naming it and
  /// --registry-port); Internal when the dir cannot be written or the program not started.
  static StatusOr<std::unique_ptr<ImageRegistry>> Start(const ImageRegistryOptions& options);

  ~ImageRegistry();
  ImageRegistry(const ImageRegistry&) = delete;
  ImageRegistry& operator=(const ImageRegistry&) = delete;

  uint16_t port() const { return options_.port; }
  /// How many times the registry was started (1 after Start; more after restarts).
  int starts() const { return starts_.load(); }
  /// The pid of the registry now running; -1 while none is (between restarts).
  int pid() const { return pid_.load(); }
  /// Stops the registry and its supervising thread; idempotent.
  void stop();

 private:
  explicit ImageRegistry(ImageRegistryOptions options);
  void supervise();

  ImageRegistryOptions options_;
  std::string program_;
  int stop_fd_ = -1;  // eventfd: readable once stop() was called
  std::atomic<int> starts_{0};
  std::atomic<int> pid_{-1};
  std::thread thread_;
};

}  // namespace hf::eks
