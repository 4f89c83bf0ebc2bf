#pragma once
// Providers turn instance specifications into running machines (the `fake` in-process
// provider for tests, `local` namespaced nodes, later `ssh`). Providers are asynchronous and
// idempotent by instance id: launch() and terminate() only record intent and return at once;
// list() reports what exists now. A repeated launch or terminate of the same instance is a
// no-op, so a controller may retry freely after a crash.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/status.h"
#include "hyperfleet/provider/node_image_variant.h"

namespace hf::provider {

/// What to launch. The control plane assigns the instance id before launching.
struct InstanceSpec {
  std::string instance_id;    ///< i- + 17 hex
  std::string cluster_id;
  std::string cluster_name;
  std::string group;          ///< instance group name
  std::string instance_type;  ///< e.g. "ml.c5.xlarge"
  nlohmann::json lifecycle;   ///< LifeCycleConfig (SourceS3Uri, OnCreate, ...), may be null
  std::string private_ip;     ///< requested address (node replacement); empty = allocate
  /// InstanceStorageConfigs asks for a secondary EBS volume, which HyperPod mounts at
  /// /opt/sagemaker (see HasSecondaryEbsVolume).
  bool secondary_ebs_volume = false;
  /// The name to keep (node replacement: the replaced node's, "ip-a-b-c-d"); empty = the
  /// provider's. A provider that cannot keep the address (the ssh provider: another machine)
  /// keeps the name, so Slurm keeps knowing the node by it, as HyperPod keeps both.
  std::string hostname;
  /// The image the node boots: kEks for clusters with Orchestrator.Eks (containerd, the
  /// kubelet); the local provider also gives such nodes what the kubelet needs.
  NodeImageVariant image_variant = NodeImageVariant::kSlurm;
};

/// Writes `spec` into a provider's record `into` (members instance_id, cluster_id,
/// cluster_name, group, instance_type, lifecycle, secondary_ebs_volume, requested_hostname,
/// image_variant as NodeImageVariantName; the requested address is not kept), for the
/// records providers re-adopt after a restart.
void WriteInstanceSpec(const InstanceSpec& spec, nlohmann::json& into);
/// The spec WriteInstanceSpec wrote; a member missing or of another type reads as empty
/// (image_variant missing or unknown, as in records written before it existed: kSlurm).
InstanceSpec ReadInstanceSpec(const nlohmann::json& from);

/// Whether an instance group's InstanceStorageConfigs (null, or the list the API accepted)
/// holds an EbsVolumeConfig that is not the root volume's (RootVolume true resizes the root
/// volume instead). Pure.
inline bool HasSecondaryEbsVolume(const nlohmann::json& instance_storage_configs) {
  if (!instance_storage_configs.is_array()) return false;
  for (const auto& config : instance_storage_configs) {
    if (!config.is_object() || !config.contains("EbsVolumeConfig")) continue;
    const auto& ebs = config["EbsVolumeConfig"];
    if (!ebs.is_object()) continue;
    const auto root = ebs.find("RootVolume");
    if (root == ebs.end() || !root->is_boolean() || !root->get<bool>()) return true;
  }
  return false;
}

/// Provider-side state of an instance.
enum class InstanceState {
  kPending,      ///< launching or booting
  kRunning,      ///< booted and ready
  kFailed,       ///< launch or boot failed; `message` says why
  kTerminating,  ///< being torn down
};

/// One instance as the provider sees it.
struct InstanceObservation {
  std::string instance_id;
  std::string cluster_id;
  InstanceState state = InstanceState::kPending;
  std::string message;     ///< failure reason when kFailed
  std::string private_ip;  ///< known once running
  std::string hostname;    ///< ip-a-b-c-d
  /// When the running system last booted (a reboot moves it); zero when unknown.
  SystemTime boot_time{};
};

/// A route of one Kubernetes Node's pod range to its node (Provider::setPodRoutes), as a
/// cloud provider's route table holds them for kube-controller-manager's route controller.
struct PodRoute {
  std::string pod_cidr;  ///< the Node's spec.podCIDR, "a.b.c.d/n", e.g. "10.200.1.0/24"
  std::string node_ip;   ///< the instance's private address, e.g. "10.224.0.5"
  auto operator<=>(const PodRoute&) const = default;
};

/// A source of instances. Implementations are thread-safe.
class Provider {
 public:
  virtual ~Provider() = default;
  /// The name used by `--provider` (e.g. "fake").
  virtual std::string_view name() const = 0;
  /// Starts launching `spec` (asynchronous). Idempotent by spec.instance_id.
  /// Errors: InvalidArgument for a spec the provider cannot run (e.g. unknown type).
  virtual Status launch(const InstanceSpec& spec) = 0;
  /// Starts terminating an instance (asynchronous). Unknown ids are a no-op.
  virtual Status terminate(std::string_view instance_id) = 0;
  /// Starts rebooting a running instance (asynchronous): it keeps its disk, address and
  /// identity, and InstanceObservation::boot_time moves once it is up again. Errors:
  /// NotFound for an unknown instance, FailedPrecondition when it is not running,
  /// Unimplemented for providers that cannot reboot.
  virtual Status reboot(std::string_view instance_id) {
    return absl::UnimplementedError(absl::StrCat("provider ", std::string(name()),
                                                 " cannot reboot ", std::string(instance_id)));
  }
  /// Terminates an instance at once, without a clean shutdown (a dead or hung node being
  /// replaced). Default: terminate().
  virtual Status terminateNow(std::string_view instance_id) { return terminate(instance_id); }
  /// Reboots an instance without asking its system (a power cycle): for a node that is hung
  /// or stopped. Keeps the disk, address and identity, like reboot(). Default: reboot().
  virtual Status powerCycle(std::string_view instance_id) { return reboot(instance_id); }
  /// Every instance of `cluster_id` that is not yet fully terminated.
  virtual StatusOr<std::vector<InstanceObservation>> list(std::string_view cluster_id) = 0;
  /// True when the provider's nodes run the lifecycle scripts themselves (through the node
  /// agent), so the control plane waits for the agent's result before `Running`.
  virtual bool runsLifecycleScripts() const { return false; }
  /// Host pid of the node's init (its systemd), for shell sessions. Errors: NotFound for an
  /// unknown or stopped node; Unimplemented for providers without host processes.
  virtual StatusOr<int> nodeInitPid(std::string_view instance_id) {
    return absl::UnimplementedError("this provider has no node processes on this host");
  }
  /// Makes `routes` the pod routes of cluster `cluster_id`'s network, all of them: each
  /// pod range reaches its node, and earlier routes not in `routes` go (EKS-orchestrated
  /// clusters: pods on different nodes reach each other; docs/kubernetes.md "Pod
  /// networking"). Idempotent; the routes go with the cluster's network. Errors:
  /// InvalidArgument for a malformed route, FailedPrecondition when the cluster has no
  /// network here (yet), Unimplemented for providers whose nodes cannot run pods.
  virtual Status setPodRoutes(std::string_view cluster_id, const std::vector<PodRoute>& routes) {
    return absl::UnimplementedError(absl::StrCat("provider ", std::string(name()),
                                                 " does not route pod ranges of cluster ",
                                                 std::string(cluster_id)));
  }
};

}  // namespace hf::provider
