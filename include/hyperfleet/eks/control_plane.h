#pragma once
// The Kubernetes control planes behind EKS clusters: the interface the EKS API's controller
// reconciles through (hf_eks), implemented for real by eks::ProcessControlPlanes (etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler run on this host, one set per EKS
// cluster, supervised and re-adopted after a restart of the server).
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/common/status.h"

namespace hf::eks {

/// The Kubernetes groups an access entry's access policy maps to (the token webhook puts them in
/// its answer; every control plane binds them at bootstrap): AmazonEKSClusterAdminPolicy is
/// "system:masters" (bound to cluster-admin by Kubernetes itself); the others go to the
/// default ClusterRoles of the same meaning (admin, edit, view).
inline constexpr std::string_view kAdminPolicyGroup = "hyperfleet:eks:admin";  ///< ClusterRole admin
inline constexpr std::string_view kEditPolicyGroup = "hyperfleet:eks:edit";    ///< ClusterRole edit
inline constexpr std::string_view kViewPolicyGroup = "hyperfleet:eks:view";    ///< ClusterRole view

/// What one EKS cluster's control plane is asked to be; built from the stored EKS cluster.
struct ControlPlaneSpec {
  std::string name;          ///< the EKS cluster name (1-100 of [0-9A-Za-z_-], the model's)
  std::string version;       ///< the requested Kubernetes version, e.g. "1.31" (as stored)
  std::string service_cidr;  ///< Services' range, e.g. "10.100.0.0/16" (EKS's default)
  /// The token webhook the apiserver asks to authenticate bearer tokens (`aws eks get-token`),
  /// e.g. "http://127.0.0.1:8080/eks/v1/authenticate/<name>"; empty: no webhook.
  std::string token_webhook_url;
};

/// Where a control plane is.
enum class ControlPlanePhase {
  kAbsent,    ///< nothing of it exists (never ensured, or removed)
  kStarting,  ///< its processes run; the apiserver's /readyz has not answered ok yet
  kReady,     ///< /readyz answers ok
  kFailed,    ///< it cannot start (message says why); ensure() again retries
};

/// A control plane as observed now.
struct ControlPlaneStatus {
  ControlPlanePhase phase = ControlPlanePhase::kAbsent;
  std::string endpoint;        ///< "https://<address>:<port>" of its apiserver; "" when absent
  std::string ca_pem;          ///< the PEM of the CA that signed the apiserver's certificate
  std::string served_version;  ///< what the apiserver reports, e.g. "v1.20.2"
  std::string message;         ///< why, when kFailed
};

/// The control planes on this host. Every call is idempotent by name and thread-safe.
class ControlPlanes {
 public:
  virtual ~ControlPlanes() = default;
  /// Starts the control plane of spec.name when it is not running (creating its data the first
  /// time); returns at once, before it is ready. Errors: the binaries are missing, ports or
  /// disk cannot be had (FailedPrecondition / Internal).
  virtual Status ensure(const ControlPlaneSpec& spec) = 0;
  /// The control plane's state now (cheap: no process is started).
  virtual ControlPlaneStatus status(std::string_view name) = 0;
  /// Stops its processes and deletes its data; ok when it is already absent.
  virtual Status remove(std::string_view name) = 0;
  /// The names of every control plane with data on this host (for adoption and cleanup).
  virtual std::vector<std::string> list() = 0;
};

}  // namespace hf::eks
