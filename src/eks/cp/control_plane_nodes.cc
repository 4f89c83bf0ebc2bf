// The Node side of eks::ProcessControlPlanes (control_plane_nodes.h).
#include "eks/cp/control_plane_nodes.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/ipv4.h"
#include "hyperfleet/common/strings.h"
#include "hyperfleet/http/tls_identity.h"

namespace hf::eks {
namespace {

using nlohmann::json;

bool AlnumLower(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

Status Malformed(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("kubectl's node list: ", AbslView(what)));
}

// One item of the list.
StatusOr<KubeNode> ParseNode(const json& item) {
  if (!item.is_object()) return Malformed("an item is not an object");
  KubeNode node;
  const json* metadata = item.contains("metadata") ? &item["metadata"] : nullptr;
  if (!metadata || !metadata->is_object() || !metadata->contains("name") ||
      !(*metadata)["name"].is_string()) {
    return Malformed("an item has no metadata.name");
  }
  node.name = (*metadata)["name"].get<std::string>();
  for (auto [member, into] : {std::pair{"labels", &node.labels},
                               std::pair{"annotations", &node.annotations}}) {
    if (!metadata->contains(member)) continue;
    const json& map = (*metadata)[member];
    if (!map.is_object()) return Malformed(absl::StrCat(node.name, ": ", member, " are not an object"));
    for (const auto& [key, value] : map.items()) {
      if (!value.is_string()) {
        return Malformed(absl::StrCat(node.name, ": ", member, " ", key, " is no string"));
      }
      (*into)[key] = value.get<std::string>();
    }
  }
  const json spec = item.value("spec", json::object());
  if (!spec.is_object()) return Malformed(node.name + ": spec is not an object");
  const auto unschedulable = spec.find("unschedulable");
  node.unschedulable = unschedulable != spec.end() && unschedulable->is_boolean() &&
                       unschedulable->get<bool>();
  const json taints = spec.value("taints", json::array());
  if (!taints.is_array()) return Malformed(node.name + ": taints are not an array");
  for (const json& t : taints) {
    if (!t.is_object() || !t.contains("key") || !t["key"].is_string() ||
        !t.contains("effect") || !t["effect"].is_string() ||
        (t.contains("value") && !t["value"].is_string())) {
      return Malformed(node.name + ": a taint is malformed");
    }
    node.taints.push_back({t["key"].get<std::string>(), t.value("value", std::string()),
                           t["effect"].get<std::string>()});
  }
  if (const auto cidr = spec.find("podCIDR"); cidr != spec.end()) {
    if (!cidr->is_string()) return Malformed(node.name + ": podCIDR is no string");
    node.pod_cidr = cidr->get<std::string>();
  }
  const json status = item.value("status", json::object());
  if (!status.is_object()) return Malformed(node.name + ": status is not an object");
  const json conditions = status.value("conditions", json::array());
  if (!conditions.is_array()) return Malformed(node.name + ": conditions are not an array");
  for (const json& c : conditions) {
    if (!c.is_object() || !c.contains("type") || !c["type"].is_string() ||
        !c.contains("status") || !c["status"].is_string()) {
      return Malformed(node.name + ": a condition is malformed");
    }
    if (c["type"] == "Ready") node.ready = c["status"] == "True";
  }
  const json addresses = status.value("addresses", json::array());
  if (!addresses.is_array()) return Malformed(node.name + ": addresses are not an array");
  for (const json& a : addresses) {
    if (!a.is_object() || !a.contains("type") || !a["type"].is_string() ||
        !a.contains("address") || !a["address"].is_string()) {
      return Malformed(node.name + ": an address is malformed");
    }
    // The first one, as the apiserver picks a Node's address.
    if (a["type"] == "InternalIP" && node.internal_ip.empty()) {
      node.internal_ip = a["address"].get<std::string>();
    }
  }
  return node;
}

bool SameTaint(const json& t, const Taint& other) {
  return t.is_object() && t.value("key", std::string()) == other.key &&
         t.value("effect", std::string()) == other.effect;
}

json TaintJson(const Taint& t) {
  json out = {{"key", t.key}, {"effect", t.effect}};
  if (!t.value.empty()) out["value"] = t.value;
  return out;
}

// The client certificate `cn`/`orgs` of the control plane's CA in a kubeconfig for `server`.
StatusOr<std::string> ClientKubeconfig(const ControlPlaneLayout& layout,
                                       const ControlPlanePlan& plan, const std::string& server,
                                       std::string cn, std::vector<std::string> orgs) {
  http::TlsIdentity ca;
  HF_ASSIGN_OR_RETURN(ca.certificate_pem, ReadFile(layout.pki() + "/ca.crt"));
  HF_ASSIGN_OR_RETURN(ca.private_key_pem, ReadFile(layout.pki() + "/ca.key"));
  http::CertificateRequest request;
  request.common_name = std::move(cn);
  request.organizations = std::move(orgs);
  request.client_auth = true;
  HF_ASSIGN_OR_RETURN(http::TlsIdentity id, http::IssueCertificate(request, &ca));
  return Kubeconfig(plan.spec.name, server, ca.certificate_pem, id.certificate_pem,
                    id.private_key_pem);
}

// The file at `path`, made by `make` (and kept, 0600) when it does not exist.
template <class Make>
StatusOr<std::string> ReadOrMake(const std::string& path, Make make) {
  auto existing = ReadFile(path);
  if (existing.ok() || !absl::IsNotFound(existing.status())) return existing;
  HF_ASSIGN_OR_RETURN(std::string text, make());
  HF_RETURN_IF_ERROR(WriteFileAtomically(path, text, 0600));
  return text;
}

}  // namespace

bool ValidNodeName(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('.', start);
    if (end == std::string_view::npos) end = name.size();
    const std::string_view label = name.substr(start, end - start);
    if (label.empty() || !AlnumLower(label.front()) || !AlnumLower(label.back())) return false;
    for (char c : label) {
      if (!AlnumLower(c) && c != '-') return false;
    }
    start = end + 1;
  }
  return true;
}

Status CheckNodeName(std::string_view name) {
  if (ValidNodeName(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "node name ", AbslView(name), " is not a DNS subdomain (at most 253 of [a-z0-9.-], each "
      "dot-separated part starting and ending with a letter or digit)"));
}

StatusOr<std::vector<KubeNode>> ParseNodeList(std::string_view text) {
  const json list = json::parse(text, nullptr, false);
  if (list.is_discarded() || !list.is_object()) return Malformed("not a JSON object");
  const auto items = list.find("items");
  if (items == list.end() || !items->is_array()) return Malformed("no items");
  std::vector<KubeNode> nodes;
  for (const json& item : *items) {
    HF_ASSIGN_OR_RETURN(KubeNode node, ParseNode(item));
    nodes.push_back(std::move(node));
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const KubeNode& a, const KubeNode& b) { return a.name < b.name; });
  return nodes;
}

void KeepPodCidrsWithin(std::vector<KubeNode>& nodes, std::string_view cluster_cidr) {
  const auto range = ParseIpv4Prefix(cluster_cidr);
  for (KubeNode& node : nodes) {
    if (node.pod_cidr.empty()) continue;
    const auto cidr = ParseIpv4Prefix(node.pod_cidr);
    const bool inside =
        range && cidr && absl::StrContains(node.pod_cidr, '/') &&
        node.pod_cidr == absl::StrCat(Ipv4Text(cidr->first), "/", cidr->second) &&
        cidr->second >= range->second && (cidr->first & PrefixMask(range->second)) == range->first;
    if (!inside) node.pod_cidr.clear();
  }
}

StatusOr<json> NodePatch(const json& node, const NodeUpdate& update) {
  if (!node.is_object() || !node.contains("metadata") || !node["metadata"].is_object() ||
      !node["metadata"].contains("resourceVersion") ||
      !node["metadata"]["resourceVersion"].is_string()) {
    return absl::InvalidArgumentError("the Node has no metadata.resourceVersion");
  }
  json patch = {{"metadata", {{"resourceVersion", node["metadata"]["resourceVersion"]}}}};
  if (!update.set_labels.empty() || !update.remove_labels.empty()) {
    json labels = json::object();
    for (const std::string& key : update.remove_labels) labels[key] = nullptr;
    for (const auto& [key, value] : update.set_labels) labels[key] = value;
    patch["metadata"]["labels"] = std::move(labels);
  }
  if (!update.set_annotations.empty() || !update.remove_annotations.empty()) {
    json annotations = json::object();
    for (const std::string& key : update.remove_annotations) annotations[key] = nullptr;
    for (const auto& [key, value] : update.set_annotations) annotations[key] = value;
    patch["metadata"]["annotations"] = std::move(annotations);
  }
  if (!update.set_taints.empty() || !update.remove_taints.empty()) {
    json taints = json::array();
    const json spec = node.value("spec", json::object());
    const json current = spec.is_object() ? spec.value("taints", json::array()) : json::array();
    for (const json& t : current.is_array() ? current : json::array()) {
      auto matches = [&](const Taint& other) { return SameTaint(t, other); };
      if (std::any_of(update.remove_taints.begin(), update.remove_taints.end(), matches) ||
          std::any_of(update.set_taints.begin(), update.set_taints.end(), matches)) {
        continue;
      }
      taints.push_back(t);  // as it is (NoExecute taints keep their timeAdded)
    }
    for (const Taint& t : update.set_taints) taints.push_back(TaintJson(t));
    patch["spec"] = {{"taints", std::move(taints)}};
  }
  return patch;
}

Status KubectlFailure(std::string_view what, std::string_view output) {
  std::string_view first = StripAsciiWhitespace(output);
  if (const size_t nl = first.find('\n'); nl != std::string_view::npos) first = first.substr(0, nl);
  const std::string message = absl::StrCat(AbslView(what), ": ", AbslView(first));
  const auto has = [&](std::string_view s) { return absl::StrContains(AbslView(output), AbslView(s)); };
  for (std::string_view down : {"connection refused", "was refused", "Unable to connect",
                                "i/o timeout", "(ServiceUnavailable)", "TLS handshake timeout",
                                "(Timeout)", "net/http: request canceled"}) {
    if (has(down)) return absl::UnavailableError(message);
  }
  if (has("(NotFound)")) return absl::NotFoundError(message);
  if (has("(Conflict)")) return absl::AbortedError(message);
  if (has("(Invalid)") || has("(BadRequest)")) return absl::InvalidArgumentError(message);
  if (has("(Forbidden)") || has("(Unauthorized)")) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

StatusOr<NodeJoin> LoadOrMakeNodeJoin(const ControlPlaneLayout& layout,
                                      const ControlPlanePlan& plan, std::string_view node_name) {
  HF_RETURN_IF_ERROR(CheckNodeName(node_name));
  const std::string server =
      absl::StrCat("https://", plan.endpoint_host, ":", plan.ports.apiserver);
  NodeJoin join;
  HF_ASSIGN_OR_RETURN(join.ca_pem, ReadFile(layout.pki() + "/ca.crt"));
  join.cluster_cidr = plan.pod_cidr;
  const std::string node_dir = layout.node_dir(node_name);
  HF_RETURN_IF_ERROR(MakeDirs(node_dir, 0700));
  HF_ASSIGN_OR_RETURN(join.kubelet_kubeconfig,
                      ReadOrMake(node_dir + "/kubelet.kubeconfig", [&] {
                        return ClientKubeconfig(layout, plan, server,
                                                absl::StrCat("system:node:", AbslView(node_name)),
                                                {"system:nodes"});
                      }));
  HF_ASSIGN_OR_RETURN(join.kube_proxy_kubeconfig,
                      ReadOrMake(layout.kube_proxy_kubeconfig(), [&] {
                        return ClientKubeconfig(layout, plan, server, "system:kube-proxy", {});
                      }));
  return join;
}

}  // namespace hf::eks
