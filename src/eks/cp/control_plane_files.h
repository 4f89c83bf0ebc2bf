#pragma once
// The files of one EKS control plane (private to hf_eks_cp): made once when it is created
// (PKI, kubeconfigs, the plan), and the supervisor's instructions, rewritten at each start.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/status.h"
#include "hyperfleet/eks/control_plane_plan.h"

namespace hf::eks {

/// What the supervisor reads from <dir>/components.json.
struct SupervisorConfig {
  std::vector<Component> components;  ///< in start order
  int apiserver_port = 0;
  std::string kubectl;           ///< for the bootstrap bindings
  std::string admin_kubeconfig;  ///< kubectl's --kubeconfig
};

nlohmann::json SupervisorConfigToJson(const SupervisorConfig& config);
/// Errors: InvalidArgument naming what is missing or malformed.
StatusOr<SupervisorConfig> SupervisorConfigFromJson(const nlohmann::json& json);

/// Makes pki/ (CA; apiserver serving certificate for `alt_names`; the apiserver's kubelet
/// client, admin (O=system:masters), controller-manager and scheduler client certificates;
/// the service-account key pair), the admin, controller-manager and scheduler kubeconfigs
/// (server https://127.0.0.1:<apiserver port>) and, when the spec names one, the token
/// webhook's kubeconfig. Keys are 0600, the directories 0700. Errors: Internal.
Status WriteControlPlaneFiles(const ControlPlaneLayout& layout, const ControlPlanePlan& plan,
                              const std::vector<std::string>& alt_names);

/// Writes (or removes, when the spec names none) the token webhook's kubeconfig.
Status WriteTokenWebhookKubeconfig(const ControlPlaneLayout& layout, const ControlPlanePlan& plan);

}  // namespace hf::eks
