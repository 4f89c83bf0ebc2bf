#pragma once
// What a node of an EKS-orchestrated HyperPod cluster (model::Cluster::eksClusterName()) gets
// besides the node contract's files (docs/kubernetes.md "Nodes"): the kubelet's and
// kube-proxy's credentials and flags, to join its EKS cluster's control plane as Node
// "hyperpod-<instance-id>", and the units its agent starts once the lifecycle scripts have
// succeeded. The EKS node image installs containerd, kubelet.service and kube-proxy.service
// without enabling them; the services read their flags from the .env files below. Pure.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hyperfleet/agentapi/protocol.h"
#include "hyperfleet/common/status.h"
#include "hyperfleet/eks/control_plane.h"
#include "hyperfleet/model/cluster.h"

namespace hf::agentapi {

/// Where the files go on the node.
inline constexpr char kKubeletKubeconfigPath[] = "/var/lib/kubelet/kubeconfig";
inline constexpr char kKubernetesCaPath[] = "/etc/kubernetes/pki/ca.crt";
inline constexpr char kKubeProxyKubeconfigPath[] = "/var/lib/kube-proxy/kubeconfig";
inline constexpr char kKubeletEnvPath[] = "/etc/hyperfleet/kubelet.env";
inline constexpr char kKubeProxyEnvPath[] = "/etc/hyperfleet/kube-proxy.env";
/// HYPERFLEET_REGISTRY_PORT=N: containerd's start maps localhost:N to the host's registry.
inline constexpr char kRegistryEnvPath[] = "/etc/hyperfleet/registry.env";

/// The labels `node`'s kubelet registers its Node with, as HyperPod sets them:
/// sagemaker.amazonaws.com/node-health-status (Schedulable; Unschedulable with deep health
/// checks, which Hyperfleet does not run yet: such a node stays Unschedulable and tainted
/// until something else relabels it), .../instance-group-name, node.kubernetes.io/instance-type
/// (the ml.* type), .../cluster-name (the HyperPod cluster's name), .../compute-type=hyperpod,
/// and .../deep-health-check-status=InProgress only with deep health checks.
std::map<std::string, std::string> KubernetesNodeLabels(const model::Cluster& cluster,
                                                        const model::Node& node);

/// The files that make `node` of `cluster` join with `join` (eks::ControlPlanes::nodeJoin for
/// KubernetesNodeName(node.instance_id)): the kubelet's kubeconfig (0600), the cluster CA
/// (0644), kube-proxy's kubeconfig (0600), kubelet.env (0644: one line KUBELET_ARGS="..."
/// with flags every kubelet release takes; the image's wrapper adds the version-specific
/// ones) and kube-proxy.env (0644: KUBE_PROXY_ARGS="...", conntrack limits 0 because
/// /proc/sys is read-only in nodes), in that order; then, when `registry_port` is not 0,
/// registry.env (0644: HYPERFLEET_REGISTRY_PORT=<port>, the host's local registry, which the
/// image's registry-hosts.sh maps localhost:<port> to before containerd starts).
std::vector<NodeFile> KubernetesNodeFiles(const model::Cluster& cluster, const model::Node& node,
                                          const eks::NodeJoin& join, uint16_t registry_port = 0);

/// The units an EKS node's agent starts, in order: containerd, kubelet, kube-proxy.
std::vector<std::string> KubernetesNodeUnits();

/// What a registering EKS node is told besides its files.
struct KubernetesStart {
  LifecycleSpec lifecycle;
  std::vector<std::string> start_units;
};

/// For `node` of EKS-orchestrated `cluster`, given LifecyclePlan's `plan` and `join`, the
/// outcome of nodeJoin for it (ok: its files are in the response): with the join, `plan` and
/// KubernetesNodeUnits(); without it, scripts that would run and the units of a node whose
/// scripts succeeded before are held (wait, naming the EKS cluster and the error; the agent
/// asks again after `retry_ms`). A node whose scripts failed or started (an interrupted run:
/// its agent reports the failure), a node shutting down and a failed cluster's nodes get
/// `plan` and no units; so does a plan already held for another reason.
KubernetesStart PlanKubernetesStart(const model::Cluster& cluster, const model::Node& node,
                                    LifecycleSpec plan, const Status& join, int64_t retry_ms);

}  // namespace hf::agentapi
