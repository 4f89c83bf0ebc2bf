// `hyperfleet eks-control-plane ...` and `eks-control-plane-supervisor` (the header says what).
#include "hyperfleet/cli/eks_control_plane_command.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyperfleet/eks/process_control_planes.h"

namespace hf::cli {
namespace {

struct EksFlags {
  std::string action;
  std::string name;
  std::string data_dir;
  std::string kubernetes_bin = eks::kDefaultKubernetesBinDir;
  std::string service_cidr = "10.100.0.0/16";
  std::string version = "1.31";
  std::string token_webhook_url;
  double wait_seconds = 0;
  std::string node;                          // node-join, node-update, node-remove
  std::vector<std::string> labels;           // node-update: KEY=VALUE
  std::vector<std::string> remove_labels;    // node-update: KEY
  std::vector<std::string> taints;           // node-update: KEY[=VALUE]:EFFECT
  std::vector<std::string> remove_taints;    // node-update: KEY:EFFECT
};

const char* PhaseName(eks::ControlPlanePhase phase) {
  switch (phase) {
    case eks::ControlPlanePhase::kAbsent: return "ABSENT";
    case eks::ControlPlanePhase::kStarting: return "STARTING";
    case eks::ControlPlanePhase::kReady: return "READY";
    case eks::ControlPlanePhase::kFailed: return "FAILED";
  }
  return "UNKNOWN";
}

nlohmann::json StatusJson(const eks::ControlPlaneStatus& s) {
  return {{"phase", PhaseName(s.phase)}, {"endpoint", s.endpoint},
          {"served_version", s.served_version}, {"message", s.message}};
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "hyperfleet eks-control-plane: %s\n", what.c_str());
  return 1;
}

// "KEY[=VALUE]:EFFECT", as kubectl taint writes a taint.
std::optional<eks::Taint> ParseTaint(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return std::nullopt;
  eks::Taint taint;
  taint.effect = text.substr(colon + 1);
  const std::string key_value = text.substr(0, colon);
  const size_t eq = key_value.find('=');
  taint.key = key_value.substr(0, eq);
  if (eq != std::string::npos) taint.value = key_value.substr(eq + 1);
  return taint;
}

nlohmann::json NodeJson(const eks::KubeNode& node) {
  nlohmann::json taints = nlohmann::json::array();
  for (const eks::Taint& t : node.taints) {
    taints.push_back({{"key", t.key}, {"value", t.value}, {"effect", t.effect}});
  }
  return {{"name", node.name}, {"ready", node.ready}, {"unschedulable", node.unschedulable},
          {"labels", node.labels}, {"taints", taints}};
}

// The Node actions: node-join, nodes, node-update, node-remove.
int RunNodeAction(const EksFlags& flags, eks::ControlPlanes& planes) {
  if (flags.action == "nodes") {
    auto nodes = planes.nodes(flags.name);
    if (!nodes.ok()) return Fail(nodes.status().ToString());
    nlohmann::json out = nlohmann::json::array();
    for (const eks::KubeNode& node : *nodes) out.push_back(NodeJson(node));
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  if (flags.node.empty()) return Fail(flags.action + " needs a NODE");
  if (flags.action == "node-join") {
    auto join = planes.nodeJoin(flags.name, flags.node);
    if (!join.ok()) return Fail(join.status().ToString());
    std::printf("%s\n", nlohmann::json{{"ca_pem", join->ca_pem},
                                       {"kubelet_kubeconfig", join->kubelet_kubeconfig},
                                       {"kube_proxy_kubeconfig", join->kube_proxy_kubeconfig},
                                       {"cluster_cidr", join->cluster_cidr}}
                             .dump()
                             .c_str());
    return 0;
  }
  if (flags.action == "node-remove") {
    Status st = planes.removeNode(flags.name, flags.node);
    return st.ok() ? 0 : Fail(st.ToString());
  }
  eks::NodeUpdate update;
  for (const std::string& label : flags.labels) {
    const size_t eq = label.find('=');
    if (eq == std::string::npos) return Fail("--label " + label + " is not KEY=VALUE");
    update.set_labels[label.substr(0, eq)] = label.substr(eq + 1);
  }
  update.remove_labels = flags.remove_labels;
  for (auto [texts, out] : {std::pair{&flags.taints, &update.set_taints},
                            std::pair{&flags.remove_taints, &update.remove_taints}}) {
    for (const std::string& text : *texts) {
      auto taint = ParseTaint(text);
      if (!taint) return Fail("taint " + text + " is not KEY[=VALUE]:EFFECT");
      out->push_back(*taint);
    }
  }
  Status st = planes.updateNode(flags.name, flags.node, update);
  return st.ok() ? 0 : Fail(st.ToString());
}

int Run(const EksFlags& flags) {
  eks::ProcessControlPlanesOptions options;
  options.data_dir = flags.data_dir + "/eks";
  options.kubernetes_bin_dir = flags.kubernetes_bin;
  auto planes = eks::MakeProcessControlPlanes(options);
  if (flags.action == "list") {
    for (const std::string& name : planes->list()) std::printf("%s\n", name.c_str());
    return 0;
  }
  if (flags.name.empty()) return Fail(flags.action + " needs a NAME");
  if (flags.action == "nodes" || flags.action.rfind("node-", 0) == 0) {
    return RunNodeAction(flags, *planes);
  }
  if (flags.action == "remove") {
    Status st = planes->remove(flags.name);
    return st.ok() ? 0 : Fail(std::string(st.message()));
  }
  const auto start = std::chrono::steady_clock::now();
  if (flags.action == "ensure") {
    Status st = planes->ensure({flags.name, flags.version, flags.service_cidr,
                                flags.token_webhook_url});
    if (!st.ok()) return Fail(std::string(st.message()));
  }
  eks::ControlPlaneStatus status = planes->status(flags.name);
  const auto deadline = start + std::chrono::duration<double>(flags.wait_seconds);
  while (status.phase == eks::ControlPlanePhase::kStarting &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    status = planes->status(flags.name);
  }
  nlohmann::json out = StatusJson(status);
  out["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s\n", out.dump().c_str());
  return status.phase == eks::ControlPlanePhase::kFailed ? 1 : 0;
}

}  // namespace

void AddEksControlPlaneCommands(CLI::App& app) {
  auto flags = std::make_shared<EksFlags>();
  auto* cmd = app.add_subcommand(
      "eks-control-plane",
      "Start, inspect or remove an EKS cluster's Kubernetes control plane on this host "
      "(what the server does for EKS clusters; for tests and debugging)");
  cmd->add_option("action", flags->action,
                  "ensure (start it, creating its data the first time), status, remove "
                  "(stop it and delete its data), list; nodes (its Nodes as JSON), "
                  "node-join (NODE's credentials as JSON), node-update (NODE's labels and "
                  "taints), node-remove (delete NODE and its pods)")
      ->required()
      ->check(CLI::IsMember({"ensure", "status", "remove", "list", "nodes", "node-join",
                             "node-update", "node-remove"}));
  cmd->add_option("name", flags->name, "The EKS cluster name");
  cmd->add_option("node", flags->node, "node-*: the Kubernetes Node name");
  cmd->add_option("--label", flags->labels, "node-update: set label KEY=VALUE");
  cmd->add_option("--remove-label", flags->remove_labels, "node-update: remove label KEY");
  cmd->add_option("--taint", flags->taints, "node-update: set taint KEY[=VALUE]:EFFECT");
  cmd->add_option("--remove-taint", flags->remove_taints, "node-update: remove taint KEY:EFFECT");
  cmd->add_option("--data-dir", flags->data_dir, "The server's data directory (uses <dir>/eks)")
      ->required();
  cmd->add_option("--kubernetes-bin", flags->kubernetes_bin,
                  "Directory with kube-apiserver, kube-controller-manager, kube-scheduler")
      ->capture_default_str();
  cmd->add_option("--service-cidr", flags->service_cidr, "ensure: the Services' IPv4 range")
      ->capture_default_str();
  cmd->add_option("--version", flags->version, "ensure: the requested Kubernetes version")
      ->capture_default_str();
  cmd->add_option("--token-webhook-url", flags->token_webhook_url,
                  "ensure: the URL the apiserver asks to authenticate bearer tokens");
  cmd->add_option("--wait", flags->wait_seconds,
                  "ensure, status: wait up to this many seconds while it is STARTING")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->callback([flags] { std::exit(Run(*flags)); });

  auto dir = std::make_shared<std::string>();
  auto* sup = app.add_subcommand("eks-control-plane-supervisor", "");  // empty: hidden
  sup->group("");
  sup->add_option("dir", *dir, "<data-dir>/eks/<name>")->required();
  sup->callback([dir] { std::exit(eks::RunControlPlaneSupervisor(*dir)); });
}

}  // namespace hf::cli
