#pragma once
// The deciding part of eks::ProcessControlPlanes (pure, table-tested): which ports and pod
// range a new control plane gets, what its apiserver certificate names, and the command
// lines of etcd, kube-apiserver, kube-controller-manager and kube-scheduler for the
// Kubernetes release that will run them.
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/status.h"
#include "hyperfleet/eks/control_plane.h"

namespace hf::eks {

/// A Kubernetes release, e.g. 1.20.2.
struct KubeVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
  auto operator<=>(const KubeVersion&) const = default;
};

/// The release in a binary's `--version` output ("Kubernetes v1.20.2") or a gitVersion
/// ("v1.31.0-eks-abc"); nullopt when there is none.
std::optional<KubeVersion> ParseKubeVersion(std::string_view text);

/// The first release without the insecure-serving flags (kube-apiserver --insecure-port,
/// controller-manager and scheduler --port/--address): inert since 1.20/1.22, removed in 1.24
/// (Kubernetes 1.24 release notes). Below it we pass them; from it on, never.
inline constexpr KubeVersion kInsecureFlagsRemoved{1, 24, 0};

/// A control plane's TCP ports on this host, all distinct.
struct ControlPlanePorts {
  int etcd_client = 0;
  int etcd_peer = 0;
  int apiserver = 0;                    ///< secure port, bound on 0.0.0.0
  int controller_manager = 0;           ///< secure port, 127.0.0.1
  int controller_manager_insecure = 0;  ///< --port below kInsecureFlagsRemoved
  int scheduler = 0;                    ///< secure port, 127.0.0.1
  int scheduler_insecure = 0;           ///< --port below kInsecureFlagsRemoved
  bool operator==(const ControlPlanePorts&) const = default;
};

/// The ports a new control plane gets: the lowest seven in [first, last] not in `unavailable`
/// (ports other control planes recorded, ports something listens on now), in the member
/// order above. Errors: ResourceExhausted when fewer than seven are free.
StatusOr<ControlPlanePorts> ChoosePorts(const std::set<int>& unavailable, int first, int last);

/// Every port of `ports`, in member order.
std::vector<int> PortList(const ControlPlanePorts& ports);

/// The pod range (--cluster-cidr) of a new control plane: the first 10.N.0.0/16, N in
/// 200..254, that is not in `used` (other control planes' ranges) and does not overlap
/// `service_cidr`. Errors: InvalidArgument naming serviceCidr when it is not an IPv4 CIDR;
/// ResourceExhausted when every range is taken.
StatusOr<std::string> ChoosePodCidr(const std::vector<std::string>& used,
                                    std::string_view service_cidr);

/// The first address of an IPv4 CIDR ("10.100.0.0/16" -> "10.100.0.1"): the `kubernetes`
/// Service's ClusterIP. Errors: InvalidArgument naming serviceCidr.
StatusOr<std::string> FirstServiceIp(std::string_view service_cidr);

/// The subjectAltNames of an apiserver's certificate: 127.0.0.1, every address in
/// `host_addresses` (deduplicated, in order), the first Service IP of `service_cidr`, and the
/// names kubernetes, kubernetes.default, kubernetes.default.svc,
/// kubernetes.default.svc.cluster.local and localhost. Errors: as FirstServiceIp.
StatusOr<std::vector<std::string>> ApiserverAltNames(
    const std::vector<std::string>& host_addresses, std::string_view service_cidr);

/// True when `name` is an EKS cluster name as the model allows: 1-100 of [0-9A-Za-z_-],
/// starting with a letter or digit (it names a directory, so nothing else may pass).
bool ValidClusterName(std::string_view name);

/// What is fixed when a control plane is first made; kept in <dir>/control-plane.json.
struct ControlPlanePlan {
  ControlPlaneSpec spec;
  ControlPlanePorts ports;
  std::string pod_cidr;         ///< --cluster-cidr, e.g. "10.200.0.0/16"
  std::string endpoint_host;    ///< the address in the endpoint (host's primary or 127.0.0.1)
  std::string advertise_address;  ///< --advertise-address (same address)
};

/// The plan as the JSON kept on disk, and back. FromJson errors: InvalidArgument naming the
/// member that is missing or of the wrong type.
nlohmann::json PlanToJson(const ControlPlanePlan& plan);
StatusOr<ControlPlanePlan> PlanFromJson(const nlohmann::json& json);

/// Where one control plane's files are, under its directory `dir` (paths are absolute).
struct ControlPlaneLayout {
  std::string dir;
  std::string pki() const { return dir + "/pki"; }
  std::string etcd_data() const { return dir + "/etcd"; }
  std::string logs() const { return dir + "/logs"; }
  std::string admin_kubeconfig() const { return dir + "/admin.kubeconfig"; }
  std::string controller_manager_kubeconfig() const {
    return dir + "/controller-manager.kubeconfig";
  }
  std::string scheduler_kubeconfig() const { return dir + "/scheduler.kubeconfig"; }
  std::string token_webhook_kubeconfig() const { return dir + "/token-webhook.kubeconfig"; }
  /// kube-proxy's kubeconfig, the same for every node (ControlPlanes::nodeJoin).
  std::string kube_proxy_kubeconfig() const { return dir + "/kube-proxy.kubeconfig"; }
  /// Node `node`'s credentials: <dir>/nodes/<node>/ (kubelet.kubeconfig).
  std::string node_dir(std::string_view node) const {
    return dir + "/nodes/" + std::string(node);
  }
};

/// One supervised program: a name (also its log's: <dir>/logs/<name>.log) and its argv.
struct Component {
  std::string name;
  std::vector<std::string> argv;
  /// Started once the apiserver's /readyz has answered ok (before its RBAC bootstrap
  /// policy exists, the controller-manager exits: it cannot read its configmap).
  bool after_apiserver_ready = false;
};

/// The binaries that run a control plane.
struct Binaries {
  std::string etcd;
  std::string apiserver;
  std::string controller_manager;
  std::string scheduler;
  KubeVersion version;  ///< kube-apiserver's --version (the others come from the same build)
};

/// etcd, kube-apiserver, kube-controller-manager and kube-scheduler, in start order, with
/// flags that exist in every release from 1.20 on (the insecure ones only below
/// kInsecureFlagsRemoved). The apiserver is told the token webhook only when
/// plan.spec.token_webhook_url is set (TokenReview authentication.k8s.io/v1).
std::vector<Component> ComponentCommands(const ControlPlanePlan& plan,
                                         const ControlPlaneLayout& layout,
                                         const Binaries& binaries);

/// A kubeconfig (YAML is a superset of JSON: this is JSON) for `server` with the CA's PEM
/// and, when both are set, a client certificate and key (PEM, embedded).
std::string Kubeconfig(std::string_view cluster_name, std::string_view server,
                       std::string_view ca_pem, std::string_view client_cert_pem,
                       std::string_view client_key_pem);

/// The kubeconfig of the token webhook at `url` (http or https with the system's CAs).
std::string TokenWebhookKubeconfig(std::string_view url);

/// The ClusterRoleBindings every control plane gets at bootstrap (a v1 List, for
/// `kubectl apply -f`): kAdminPolicyGroup -> admin, kEditPolicyGroup -> edit,
/// kViewPolicyGroup -> view, each named after its group.
nlohmann::json BootstrapObjects();

}  // namespace hf::eks
