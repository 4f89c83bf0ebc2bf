#pragma once
// eks::ProcessControlPlanes: real Kubernetes control planes on this host, one per EKS
// cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler), each under a
// detached supervisor (`hyperfleet eks-control-plane-supervisor <dir>`) so that it outlives
// the server and is adopted again by the next one.
#include <memory>
#include <string>
#include <vector>

#include "hyperfleet/common/clock.h"
#include "hyperfleet/eks/control_plane.h"

namespace hf::eks {

/// Where the Kubernetes binaries are by default: scripts/kubernetes builds them there.
inline constexpr const char* kDefaultKubernetesBinDir =
    "/var/lib/hyperfleet/kubernetes/current/bin";

/// How MakeProcessControlPlanes finds its programs and addresses.
struct ProcessControlPlanesOptions {
  /// <data-dir>/eks: one directory (0700) per control plane, named after the cluster.
  std::string data_dir;
  /// kube-apiserver, kube-controller-manager, kube-scheduler (and kubectl, for bootstrap;
  /// else kubectl on PATH).
  std::string kubernetes_bin_dir = kDefaultKubernetesBinDir;
  /// etcd; "": FindProgram("etcd").
  std::string etcd_binary;
  /// The supervisor's command, to which the control plane's directory is appended; empty:
  /// {<this executable>, "eks-control-plane-supervisor"}.
  std::vector<std::string> supervisor_command;
  /// The host's IPv4 addresses for the apiserver certificate (127.0.0.1 is always added);
  /// empty: every address of every interface now. The first non-loopback one is the
  /// endpoint's and the advertised address (127.0.0.1 when there is none).
  std::vector<std::string> host_addresses;
  /// Ports of new control planes come from this range (below Linux's ephemeral ports).
  int first_port = 26000;
  int last_port = 26999;
  /// Host-wide record of the ports control planes chose, shared with other data dirs' servers
  /// so two never choose the same (control_plane_host.h); "": the default for this user.
  std::string port_reservations_dir;
  /// Whose monotonic time the waits are measured in; null: the system's.
  const Clock* clock = nullptr;
};

/// The ControlPlanes that run real processes (see the file comment). Directory of one
/// control plane: control-plane.json (the plan: ports, pod range, spec), pki/ (CA,
/// apiserver, clients, service-account keys), admin.kubeconfig (client certificate in
/// system:masters, for Hyperfleet itself), the controller-manager's and scheduler's
/// kubeconfigs, token-webhook.kubeconfig, etcd/, logs/<component>.log, supervisor.pid,
/// ready.json (written once the apiserver answered /readyz and the bootstrap bindings
/// were applied: {"served_version": ...}), failure.txt (why a component keeps failing).
std::unique_ptr<ControlPlanes> MakeProcessControlPlanes(
    const ProcessControlPlanesOptions& options);

/// The supervisor of the control plane in `dir` (the hidden `eks-control-plane-supervisor`
/// subcommand): starts its components from <dir>/components.json (the controller-manager
/// and scheduler once the apiserver's /readyz answered ok), restarts one that ends
/// (after 1 s, doubling to 30 s while it keeps failing), applies the bootstrap bindings once
/// the apiserver is ready, and on SIGTERM stops them all (SIGTERM, SIGKILL after 10 s).
/// Returns the process's exit status.
int RunControlPlaneSupervisor(const std::string& dir);

}  // namespace hf::eks
