#include "hyperfleet/agentapi/kubernetes_node_files.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hf::agentapi {
namespace {

namespace is = model::instance_status;
namespace ls = model::lifecycle_state;

constexpr char kDeepHealthCheckStatusKey[] = "sagemaker.amazonaws.com/deep-health-check-status";

/// `flags` as the value of `name` in a systemd EnvironmentFile: NAME="--a --b". The values
/// are names, addresses and paths: no quotes, backslashes or newlines to escape.
std::string EnvLine(const std::string& name, const std::vector<std::string>& flags) {
  return absl::StrCat(name, "=\"", absl::StrJoin(flags, " "), "\"\n");
}

}  // namespace

std::map<std::string, std::string> KubernetesNodeLabels(const model::Cluster& cluster,
                                                        const model::Node& node) {
  const bool deep = model::HasOnStartDeepHealthChecks(cluster, node);
  std::map<std::string, std::string> labels = {
      {model::node_health::kLabel,
       deep ? model::node_health::kUnschedulable : model::node_health::kSchedulable},
      {"sagemaker.amazonaws.com/instance-group-name", node.group},
      {"node.kubernetes.io/instance-type", node.instance_type},
      {"sagemaker.amazonaws.com/cluster-name", cluster.name},
      {"sagemaker.amazonaws.com/compute-type", "hyperpod"},
  };
  if (deep) labels[kDeepHealthCheckStatusKey] = "InProgress";
  return labels;
}

std::vector<NodeFile> KubernetesNodeFiles(const model::Cluster& cluster, const model::Node& node,
                                          const eks::NodeJoin& join, uint16_t registry_port) {
  const std::string name = model::KubernetesNodeName(node.instance_id);
  std::vector<std::string> labels;
  for (const auto& [key, value] : KubernetesNodeLabels(cluster, node)) {
    labels.push_back(absl::StrCat(key, "=", value));
  }
  std::vector<std::string> kubelet = {
      absl::StrCat("--kubeconfig=", kKubeletKubeconfigPath),
      absl::StrCat("--client-ca-file=", kKubernetesCaPath),
      "--anonymous-auth=false",
      "--authorization-mode=Webhook",
      "--hostname-override=" + name,
  };
  if (!node.private_ip.empty()) kubelet.push_back("--node-ip=" + node.private_ip);
  kubelet.push_back("--container-runtime-endpoint=unix:///run/containerd/containerd.sock");
  // The image's containerd runs runc with cgroupfs (no SystemdCgroup): the kubelet must match.
  kubelet.push_back("--cgroup-driver=cgroupfs");
  kubelet.push_back("--fail-swap-on=false");
  // The Node registers NotReady (its CNI config follows the pod CIDR the controller-manager
  // assigns at registration) and turned Ready only at the next status sync, 10 s by default:
  // 2 s takes about 9 s off every join and replacement (bench/README.md, eks_nodes_bench). The
  // kubelet still writes the status only when it changed.
  kubelet.push_back("--node-status-update-frequency=2s");
  kubelet.push_back("--node-labels=" + absl::StrJoin(labels, ","));
  if (model::HasOnStartDeepHealthChecks(cluster, node)) {
    kubelet.push_back(absl::StrCat("--register-with-taints=", model::node_health::kLabel, "=",
                                   model::node_health::kUnschedulable, ":NoSchedule"));
  }
  const std::vector<std::string> proxy = {
      absl::StrCat("--kubeconfig=", kKubeProxyKubeconfigPath),
      "--hostname-override=" + name,
      "--cluster-cidr=" + join.cluster_cidr,
      "--proxy-mode=iptables",
      // 0: leave the host's conntrack sysctls alone (/proc/sys is read-only in nodes).
      "--conntrack-max-per-core=0",
      "--conntrack-tcp-timeout-established=0",
      "--conntrack-tcp-timeout-close-wait=0",
  };
  std::vector<NodeFile> files = {
      {kKubeletKubeconfigPath, 0600, join.kubelet_kubeconfig},
      {kKubernetesCaPath, 0644, join.ca_pem},
      {kKubeProxyKubeconfigPath, 0600, join.kube_proxy_kubeconfig},
      {kKubeletEnvPath, 0644, EnvLine("KUBELET_ARGS", kubelet)},
      {kKubeProxyEnvPath, 0644, EnvLine("KUBE_PROXY_ARGS", proxy)},
  };
  if (registry_port != 0) {
    files.push_back(
        {kRegistryEnvPath, 0644, absl::StrCat("HYPERFLEET_REGISTRY_PORT=", registry_port, "\n")});
  }
  return files;
}

std::vector<std::string> KubernetesNodeUnits() {
  return {"containerd.service", "kubelet.service", "kube-proxy.service"};
}

KubernetesStart PlanKubernetesStart(const model::Cluster& cluster, const model::Node& node,
                                    LifecycleSpec plan, const Status& join, int64_t retry_ms) {
  KubernetesStart out;
  out.lifecycle = std::move(plan);
  const std::string eks_name = cluster.eksClusterName();
  if (eks_name.empty() || out.lifecycle.wait || node.status == is::kShuttingDown ||
      cluster.status == model::cluster_status::kFailed ||
      node.lifecycle_state == ls::kFailed || node.lifecycle_state == ls::kStarted) {
    return out;
  }
  if (join.ok()) {
    out.start_units = KubernetesNodeUnits();
    return out;
  }
  // Not yet: without its credentials the kubelet cannot join, and scripts that talk to the
  // cluster (kubectl in on_create) would fail.
  LifecycleSpec wait;
  wait.wait = true;
  wait.wait_reason = absl::StrCat("the Kubernetes control plane of EKS cluster ", eks_name,
                                  " cannot take this node yet: ", join.message());
  wait.retry_ms = retry_ms;
  out.lifecycle = std::move(wait);
  return out;
}

}  // namespace hf::agentapi
