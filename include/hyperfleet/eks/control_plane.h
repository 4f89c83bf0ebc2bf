#pragma once
// The Kubernetes control planes behind EKS clusters: the interface the EKS API's controller
// reconciles through (hf_eks), implemented for real by eks::ProcessControlPlanes (etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler run on this host, one set per EKS
// cluster, supervised and re-adopted after a restart of the server).
#include <map>
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

/// What a node needs to join a control plane as Kubernetes node `node_name`: texts to write
/// on it as they are.
struct NodeJoin {
  std::string ca_pem;  ///< the control plane's CA (the kubelet's --client-ca-file: apiserver calls)
  /// kubeconfig for the kubelet: server = the control plane's endpoint, a client certificate
  /// of its CA for user "system:node:<node_name>" in group "system:nodes" (so the Node
  /// authorizer and NodeRestriction let it act for that Node only).
  std::string kubelet_kubeconfig;
  /// kubeconfig for kube-proxy: user "system:kube-proxy" (bound to system:node-proxier by
  /// Kubernetes' bootstrap policy); the same for every node of the cluster.
  std::string kube_proxy_kubeconfig;
  /// The cluster's pod range, e.g. "10.200.0.0/16" (kube-proxy's --cluster-cidr); the
  /// controller-manager gives each Node a /24 of it.
  std::string cluster_cidr;
  bool operator==(const NodeJoin&) const = default;
};

/// One taint of a Kubernetes Node (core/v1 Taint).
struct Taint {
  std::string key;
  std::string value;   ///< may be empty
  std::string effect;  ///< "NoSchedule", "PreferNoSchedule" or "NoExecute"
  bool operator==(const Taint&) const = default;
};

/// A Kubernetes Node as the control plane's API shows it now.
struct KubeNode {
  std::string name;  ///< metadata.name, e.g. "hyperpod-i-0123456789abcdef0"
  /// The Ready condition is "True" (the kubelet posts status and the runtime and network work).
  bool ready = false;
  bool unschedulable = false;  ///< spec.unschedulable (kubectl cordon)
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::vector<Taint> taints;
  /// spec.podCIDR, e.g. "10.200.1.0/24": the pod range the controller-manager gave the Node
  /// (its kubelet's pods take addresses from it); "" before it is given. The control
  /// planes' nodes() leaves it empty when it is not inside the cluster's pod range
  /// (NodeJoin::cluster_cidr), so a Node written by hand can never route other addresses.
  std::string pod_cidr;
  /// The address of status.addresses of type InternalIP (the kubelet's --node-ip), e.g.
  /// "10.224.0.5"; "" when none.
  std::string internal_ip;
  bool operator==(const KubeNode&) const = default;
};

/// A change to one Node's labels, annotations and taints, made at once (one patch); what it
/// does not name stays as it is.
struct NodeUpdate {
  std::map<std::string, std::string> set_labels;  ///< added or overwritten
  std::vector<std::string> remove_labels;         ///< keys; absent ones are fine
  std::map<std::string, std::string> set_annotations;  ///< added or overwritten
  std::vector<std::string> remove_annotations;         ///< keys; absent ones are fine
  std::vector<Taint> set_taints;                  ///< replace any taint of the same key and effect
  std::vector<Taint> remove_taints;               ///< matched by key and effect; absent ones are fine
  bool operator==(const NodeUpdate&) const = default;
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

  // Nodes (HyperPod instances of a cluster with Orchestrator.Eks). Errors of each: NotFound
  // when the control plane `name` does not exist; Unavailable when its apiserver does not
  // answer (not ready yet, or stopped); InvalidArgument for a node name that is not a DNS
  // subdomain.

  /// The credentials node `node_name` joins with; made once and kept with the control plane
  /// (the same texts on every call, also after a restart of the server), deleted with it.
  virtual StatusOr<NodeJoin> nodeJoin(std::string_view name, std::string_view node_name) = 0;
  /// Every Node of the control plane now, sorted by name.
  virtual StatusOr<std::vector<KubeNode>> nodes(std::string_view name) = 0;
  /// Applies `update` to Node `node_name`. NotFound when there is no such Node.
  virtual Status updateNode(std::string_view name, std::string_view node_name,
                            const NodeUpdate& update) = 0;
  /// Deletes Node `node_name` and, at once (grace period 0), every pod bound to it, so that
  /// their controllers make new ones elsewhere without waiting for Kubernetes' eviction
  /// timeouts; forgets the node's credentials. Ok when the Node is already gone.
  virtual Status removeNode(std::string_view name, std::string_view node_name) = 0;
};

}  // namespace hf::eks
