// The files of one EKS control plane (control_plane_files.h).
#include "eks/cp/control_plane_files.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/http/tls_identity.h"

namespace hf::eks {
namespace {

// Writes `identity` as <pki>/<name>.crt and <name>.key (0600), key first.
Status WriteIdentity(const std::string& pki, const std::string& name,
                     const http::TlsIdentity& identity) {
  HF_RETURN_IF_ERROR(
      WriteFileAtomically(pki + "/" + name + ".key", identity.private_key_pem, 0600));
  return WriteFileAtomically(pki + "/" + name + ".crt", identity.certificate_pem, 0644);
}

StatusOr<http::TlsIdentity> Client(const http::TlsIdentity& ca, std::string cn,
                                   std::vector<std::string> orgs) {
  http::CertificateRequest request;
  request.common_name = std::move(cn);
  request.organizations = std::move(orgs);
  request.client_auth = true;
  return http::IssueCertificate(request, &ca);
}

}  // namespace

nlohmann::json SupervisorConfigToJson(const SupervisorConfig& config) {
  nlohmann::json components = nlohmann::json::array();
  for (const Component& c : config.components) {
    components.push_back(
        {{"name", c.name}, {"argv", c.argv}, {"after_apiserver_ready", c.after_apiserver_ready}});
  }
  return {{"components", components},
          {"apiserver_port", config.apiserver_port},
          {"kubectl", config.kubectl},
          {"admin_kubeconfig", config.admin_kubeconfig}};
}

StatusOr<SupervisorConfig> SupervisorConfigFromJson(const nlohmann::json& json) {
  auto bad = [](const char* what) {
    return absl::InvalidArgumentError(absl::StrCat("components.json: ", what, " is malformed"));
  };
  if (!json.is_object()) return bad("the document");
  SupervisorConfig config;
  const auto components = json.find("components");
  if (components == json.end() || !components->is_array()) return bad("components");
  for (const nlohmann::json& c : *components) {
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string() ||
        !c.contains("argv") || !c["argv"].is_array() || c["argv"].empty()) {
      return bad("a component");
    }
    const auto after = c.find("after_apiserver_ready");
    Component component{c["name"].get<std::string>(), {},
                        after != c.end() && after->is_boolean() && after->get<bool>()};
    for (const nlohmann::json& arg : c["argv"]) {
      if (!arg.is_string()) return bad("a component's argv");
      component.argv.push_back(arg.get<std::string>());
    }
    config.components.push_back(std::move(component));
  }
  const auto port = json.find("apiserver_port");
  if (port == json.end() || !port->is_number_integer()) return bad("apiserver_port");
  config.apiserver_port = port->get<int>();
  for (auto [key, out] : {std::pair{"kubectl", &config.kubectl},
                          std::pair{"admin_kubeconfig", &config.admin_kubeconfig}}) {
    const auto it = json.find(key);
    if (it == json.end() || !it->is_string()) return bad(key);
    *out = it->get<std::string>();
  }
  return config;
}

Status WriteControlPlaneFiles(const ControlPlaneLayout& layout, const ControlPlanePlan& plan,
                              const std::vector<std::string>& alt_names) {
  const std::string pki = layout.pki();
  HF_RETURN_IF_ERROR(MakeDirs(pki, 0700));
  http::CertificateRequest ca_request;
  ca_request.common_name = "hyperfleet-eks-" + plan.spec.name;
  ca_request.ca = true;
  HF_ASSIGN_OR_RETURN(http::TlsIdentity ca, http::IssueCertificate(ca_request, nullptr));
  HF_RETURN_IF_ERROR(WriteIdentity(pki, "ca", ca));

  http::CertificateRequest server;
  server.common_name = "kube-apiserver";
  server.alt_names = alt_names;
  server.server_auth = true;
  HF_ASSIGN_OR_RETURN(http::TlsIdentity apiserver, http::IssueCertificate(server, &ca));
  HF_RETURN_IF_ERROR(WriteIdentity(pki, "apiserver", apiserver));
  HF_ASSIGN_OR_RETURN(http::TlsIdentity kubelet_client,
                      Client(ca, "kube-apiserver-kubelet-client", {"system:masters"}));
  HF_RETURN_IF_ERROR(WriteIdentity(pki, "apiserver-kubelet-client", kubelet_client));

  HF_ASSIGN_OR_RETURN(http::KeyPairPem sa, http::MakeEcKeyPair());
  HF_RETURN_IF_ERROR(WriteFileAtomically(pki + "/sa.key", sa.private_key_pem, 0600));
  HF_RETURN_IF_ERROR(WriteFileAtomically(pki + "/sa.pub", sa.public_key_pem, 0644));

  const std::string local = absl::StrCat("https://127.0.0.1:", plan.ports.apiserver);
  struct User {
    std::string cn;
    std::vector<std::string> orgs;
    std::string kubeconfig;
  };
  for (const User& user : {User{"hyperfleet-admin", {"system:masters"}, layout.admin_kubeconfig()},
                           User{"system:kube-controller-manager", {},
                                layout.controller_manager_kubeconfig()},
                           User{"system:kube-scheduler", {}, layout.scheduler_kubeconfig()}}) {
    HF_ASSIGN_OR_RETURN(http::TlsIdentity id, Client(ca, user.cn, user.orgs));
    HF_RETURN_IF_ERROR(WriteFileAtomically(
        user.kubeconfig,
        Kubeconfig(plan.spec.name, local, ca.certificate_pem, id.certificate_pem,
                   id.private_key_pem),
        0600));
  }
  return WriteTokenWebhookKubeconfig(layout, plan);
}

Status WriteTokenWebhookKubeconfig(const ControlPlaneLayout& layout,
                                   const ControlPlanePlan& plan) {
  const std::string path = layout.token_webhook_kubeconfig();
  if (plan.spec.token_webhook_url.empty()) {
    unlink(path.c_str());
    return absl::OkStatus();
  }
  return WriteFileAtomically(path, TokenWebhookKubeconfig(plan.spec.token_webhook_url), 0600);
}

}  // namespace hf::eks
