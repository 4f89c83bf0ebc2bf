// The deciding part of the EKS control planes (control_plane_plan.h): pure functions only.
#include "hyperfleet/eks/control_plane_plan.h"

#include <algorithm>
#include <regex>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "hyperfleet/common/ipv4.h"
#include "hyperfleet/common/strings.h"

namespace hf::eks {
namespace {

constexpr int kPortCount = 7;

// A Service or pod range: "a.b.c.d/n" with the "/n" written and n 1 to 30 (a range needs
// room for a network, a first address and more); host bits cleared.
std::optional<Ipv4Prefix> ParseRange(std::string_view text) {
  const auto range = ParseIpv4Prefix(text);
  if (!range || text.find('/') == std::string_view::npos || range->second < 1 ||
      range->second > 30) {
    return std::nullopt;
  }
  return range;
}

bool Overlaps(const Ipv4Prefix& a, const Ipv4Prefix& b) {
  return PrefixesOverlap(a.first, a.second, b.first, b.second);
}

Status BadServiceCidr(std::string_view cidr) {
  return absl::InvalidArgumentError(absl::StrCat(
      "serviceCidr ", AbslView(cidr), " is not an IPv4 CIDR block with a prefix of /1 to /30"));
}

}  // namespace

std::optional<KubeVersion> ParseKubeVersion(std::string_view text) {
  static const std::regex re(R"(v(\d+)\.(\d+)\.(\d+))");
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_search(text.begin(), text.end(), m, re)) return std::nullopt;
  KubeVersion v;
  if (!absl::SimpleAtoi(m[1].str(), &v.major) || !absl::SimpleAtoi(m[2].str(), &v.minor) ||
      !absl::SimpleAtoi(m[3].str(), &v.patch)) {
    return std::nullopt;
  }
  return v;
}

StatusOr<ControlPlanePorts> ChoosePorts(const std::set<int>& unavailable, int first, int last) {
  std::vector<int> picked;
  for (int port = std::max(first, 1); port <= std::min(last, 65535); ++port) {
    if (unavailable.count(port) == 0) picked.push_back(port);
    if (picked.size() == kPortCount) break;
  }
  if (picked.size() < kPortCount) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "no ", kPortCount, " free TCP ports in ", first, "-", last, " for a control plane"));
  }
  return ControlPlanePorts{picked[0], picked[1], picked[2], picked[3],
                           picked[4], picked[5], picked[6]};
}

std::vector<int> PortList(const ControlPlanePorts& p) {
  return {p.etcd_client,           p.etcd_peer, p.apiserver,         p.controller_manager,
          p.controller_manager_insecure, p.scheduler, p.scheduler_insecure};
}

StatusOr<std::string> ChoosePodCidr(const std::vector<std::string>& used,
                                    std::string_view service_cidr) {
  const auto service = ParseRange(service_cidr);
  if (!service) return BadServiceCidr(service_cidr);
  for (int n = 200; n <= 254; ++n) {
    const std::string candidate = absl::StrCat("10.", n, ".0.0/16");
    const Ipv4Prefix range = *ParseRange(candidate);
    if (Overlaps(range, *service)) continue;
    bool taken = false;
    for (const std::string& other : used) {
      const auto o = ParseRange(other);
      if (o && Overlaps(range, *o)) taken = true;
    }
    if (!taken) return candidate;
  }
  return absl::ResourceExhaustedError("every pod range 10.200.0.0/16-10.254.0.0/16 is in use");
}

StatusOr<std::string> FirstServiceIp(std::string_view service_cidr) {
  const auto cidr = ParseRange(service_cidr);
  if (!cidr) return BadServiceCidr(service_cidr);
  return Ipv4Text(cidr->first + 1);
}

StatusOr<std::vector<std::string>> ApiserverAltNames(
    const std::vector<std::string>& host_addresses, std::string_view service_cidr) {
  HF_ASSIGN_OR_RETURN(std::string service_ip, FirstServiceIp(service_cidr));
  std::vector<std::string> out = {"127.0.0.1"};
  auto add = [&out](const std::string& name) {
    if (!name.empty() && std::find(out.begin(), out.end(), name) == out.end()) {
      out.push_back(name);
    }
  };
  for (const std::string& a : host_addresses) add(a);
  add(service_ip);
  for (const char* name : {"kubernetes", "kubernetes.default", "kubernetes.default.svc",
                           "kubernetes.default.svc.cluster.local", "localhost"}) {
    add(name);
  }
  return out;
}

bool ValidClusterName(std::string_view name) {
  if (name.empty() || name.size() > 100) return false;
  auto alnum = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  };
  if (!alnum(name[0])) return false;
  for (char c : name) {
    if (!alnum(c) && c != '_' && c != '-') return false;
  }
  return true;
}

nlohmann::json PlanToJson(const ControlPlanePlan& plan) {
  const ControlPlanePorts& p = plan.ports;
  return {{"name", plan.spec.name},
          {"version", plan.spec.version},
          {"service_cidr", plan.spec.service_cidr},
          {"token_webhook_url", plan.spec.token_webhook_url},
          {"ports",
           {{"etcd_client", p.etcd_client},
            {"etcd_peer", p.etcd_peer},
            {"apiserver", p.apiserver},
            {"controller_manager", p.controller_manager},
            {"controller_manager_insecure", p.controller_manager_insecure},
            {"scheduler", p.scheduler},
            {"scheduler_insecure", p.scheduler_insecure}}},
          {"pod_cidr", plan.pod_cidr},
          {"endpoint_host", plan.endpoint_host},
          {"advertise_address", plan.advertise_address}};
}

StatusOr<ControlPlanePlan> PlanFromJson(const nlohmann::json& json) {
  auto str = [&](const nlohmann::json& obj, const char* key) -> StatusOr<std::string> {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("control-plane.json: ", key, " is not a string"));
    }
    return it->get<std::string>();
  };
  auto port = [&](const nlohmann::json& obj, const char* key) -> StatusOr<int> {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_number_integer() || *it < 1 || *it > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("control-plane.json: ports.", key,
                                                     " is not a port number"));
    }
    return it->get<int>();
  };
  if (!json.is_object() || !json.contains("ports") || !json["ports"].is_object()) {
    return absl::InvalidArgumentError("control-plane.json: ports is not an object");
  }
  ControlPlanePlan plan;
  HF_ASSIGN_OR_RETURN(plan.spec.name, str(json, "name"));
  HF_ASSIGN_OR_RETURN(plan.spec.version, str(json, "version"));
  HF_ASSIGN_OR_RETURN(plan.spec.service_cidr, str(json, "service_cidr"));
  HF_ASSIGN_OR_RETURN(plan.spec.token_webhook_url, str(json, "token_webhook_url"));
  HF_ASSIGN_OR_RETURN(plan.pod_cidr, str(json, "pod_cidr"));
  HF_ASSIGN_OR_RETURN(plan.endpoint_host, str(json, "endpoint_host"));
  HF_ASSIGN_OR_RETURN(plan.advertise_address, str(json, "advertise_address"));
  const nlohmann::json& p = json["ports"];
  ControlPlanePorts& out = plan.ports;
  HF_ASSIGN_OR_RETURN(out.etcd_client, port(p, "etcd_client"));
  HF_ASSIGN_OR_RETURN(out.etcd_peer, port(p, "etcd_peer"));
  HF_ASSIGN_OR_RETURN(out.apiserver, port(p, "apiserver"));
  HF_ASSIGN_OR_RETURN(out.controller_manager, port(p, "controller_manager"));
  HF_ASSIGN_OR_RETURN(out.controller_manager_insecure, port(p, "controller_manager_insecure"));
  HF_ASSIGN_OR_RETURN(out.scheduler, port(p, "scheduler"));
  HF_ASSIGN_OR_RETURN(out.scheduler_insecure, port(p, "scheduler_insecure"));
  return plan;
}

std::vector<Component> ComponentCommands(const ControlPlanePlan& plan,
                                         const ControlPlaneLayout& layout,
                                         const Binaries& bin) {
  const ControlPlanePorts& p = plan.ports;
  const std::string pki = layout.pki();
  const std::string etcd_client = absl::StrCat("http://127.0.0.1:", p.etcd_client);
  const std::string etcd_peer = absl::StrCat("http://127.0.0.1:", p.etcd_peer);
  const bool insecure_flags = bin.version < kInsecureFlagsRemoved;

  Component etcd{"etcd",
                 {bin.etcd, "--name=default", "--data-dir=" + layout.etcd_data(),
                  "--listen-client-urls=" + etcd_client, "--advertise-client-urls=" + etcd_client,
                  "--listen-peer-urls=" + etcd_peer,
                  "--initial-advertise-peer-urls=" + etcd_peer,
                  "--initial-cluster=default=" + etcd_peer}};

  Component api{"kube-apiserver",
                {bin.apiserver, "--etcd-servers=" + etcd_client, "--bind-address=0.0.0.0",
                 absl::StrCat("--secure-port=", p.apiserver),
                 "--advertise-address=" + plan.advertise_address,
                 "--tls-cert-file=" + pki + "/apiserver.crt",
                 "--tls-private-key-file=" + pki + "/apiserver.key",
                 "--client-ca-file=" + pki + "/ca.crt",
                 "--kubelet-client-certificate=" + pki + "/apiserver-kubelet-client.crt",
                 "--kubelet-client-key=" + pki + "/apiserver-kubelet-client.key",
                 "--service-cluster-ip-range=" + plan.spec.service_cidr,
                 "--service-account-key-file=" + pki + "/sa.pub",
                 "--service-account-signing-key-file=" + pki + "/sa.key",
                 "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                 "--authorization-mode=Node,RBAC",
                 // With the Node authorizer: a kubelet may change its own Node and pods only.
                 "--enable-admission-plugins=NodeRestriction", "--allow-privileged=true",
                 // Logs and exec reach a kubelet by its Node's address: no DNS knows the
                 // names of HyperPod's nodes.
                 "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname"}};
  if (!plan.spec.token_webhook_url.empty()) {
    api.argv.push_back("--authentication-token-webhook-config-file=" +
                       layout.token_webhook_kubeconfig());
    api.argv.push_back("--authentication-token-webhook-version=v1");
  }
  if (insecure_flags) api.argv.push_back("--insecure-port=0");

  const std::string cm_kubeconfig = layout.controller_manager_kubeconfig();
  Component cm{"kube-controller-manager",
               {bin.controller_manager, "--kubeconfig=" + cm_kubeconfig,
                "--authentication-kubeconfig=" + cm_kubeconfig,
                "--authorization-kubeconfig=" + cm_kubeconfig, "--bind-address=127.0.0.1",
                absl::StrCat("--secure-port=", p.controller_manager), "--leader-elect=false",
                "--allocate-node-cidrs=true", "--cluster-cidr=" + plan.pod_cidr,
                "--node-cidr-mask-size=24",
                "--service-cluster-ip-range=" + plan.spec.service_cidr,
                "--service-account-private-key-file=" + pki + "/sa.key",
                "--root-ca-file=" + pki + "/ca.crt",
                "--cluster-signing-cert-file=" + pki + "/ca.crt",
                "--cluster-signing-key-file=" + pki + "/ca.key",
                "--use-service-account-credentials=true"},
               true};
  const std::string sched_kubeconfig = layout.scheduler_kubeconfig();
  Component sched{"kube-scheduler",
                  {bin.scheduler, "--kubeconfig=" + sched_kubeconfig,
                   "--authentication-kubeconfig=" + sched_kubeconfig,
                   "--authorization-kubeconfig=" + sched_kubeconfig,
                   "--bind-address=127.0.0.1", absl::StrCat("--secure-port=", p.scheduler),
                   "--leader-elect=false"},
                  true};
  if (insecure_flags) {
    for (auto [c, port] : {std::pair{&cm, p.controller_manager_insecure},
                           std::pair{&sched, p.scheduler_insecure}}) {
      c->argv.push_back("--address=127.0.0.1");
      c->argv.push_back(absl::StrCat("--port=", port));
    }
  }
  return {std::move(etcd), std::move(api), std::move(cm), std::move(sched)};
}

std::string Kubeconfig(std::string_view cluster_name, std::string_view server,
                       std::string_view ca_pem, std::string_view client_cert_pem,
                       std::string_view client_key_pem) {
  const std::string name(cluster_name);
  nlohmann::json user = nlohmann::json::object();
  if (!client_cert_pem.empty() && !client_key_pem.empty()) {
    user["client-certificate-data"] = absl::Base64Escape(AbslView(client_cert_pem));
    user["client-key-data"] = absl::Base64Escape(AbslView(client_key_pem));
  }
  nlohmann::json cluster = {{"server", std::string(server)}};
  if (!ca_pem.empty()) cluster["certificate-authority-data"] = absl::Base64Escape(AbslView(ca_pem));
  const nlohmann::json config = {
      {"apiVersion", "v1"},
      {"kind", "Config"},
      {"clusters", {{{"name", name}, {"cluster", cluster}}}},
      {"users", {{{"name", name}, {"user", user}}}},
      {"contexts", {{{"name", name}, {"context", {{"cluster", name}, {"user", name}}}}}},
      {"current-context", name},
  };
  return config.dump(2) + "\n";
}

std::string TokenWebhookKubeconfig(std::string_view url) {
  return Kubeconfig("token-webhook", url, "", "", "");
}

nlohmann::json BootstrapObjects() {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& [group, role] : {std::pair{kAdminPolicyGroup, "admin"},
                                    std::pair{kEditPolicyGroup, "edit"},
                                    std::pair{kViewPolicyGroup, "view"}}) {
    items.push_back({{"apiVersion", "rbac.authorization.k8s.io/v1"},
                     {"kind", "ClusterRoleBinding"},
                     {"metadata", {{"name", std::string(group)}}},
                     {"roleRef",
                      {{"apiGroup", "rbac.authorization.k8s.io"},
                       {"kind", "ClusterRole"},
                       {"name", role}}},
                     {"subjects",
                      {{{"apiGroup", "rbac.authorization.k8s.io"},
                        {"kind", "Group"},
                        {"name", std::string(group)}}}}});
  }
  return {{"apiVersion", "v1"}, {"kind", "List"}, {"items", items}};
}

}  // namespace hf::eks
