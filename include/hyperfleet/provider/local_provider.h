#pragma once
// The `local` provider: every instance is a namespaced machine on this host (docs/nodes.md):
// its own network namespace on a per-cluster bridge, an overlay root over the shared node
// image, and real systemd as PID 1 under systemd-nspawn, started by a detached supervisor
// (`hyperfleet node-supervisor <node-dir>`) so that nodes outlive a server restart. Each
// cluster also gets an IMDSv2 endpoint at 169.254.169.254 and a shared /fsx. Needs root.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "hyperfleet/http/http_server.h"
#include "hyperfleet/provider/provider.h"

namespace hf::provider {

/// What a node takes from its instance type: CPU and memory, applied as cgroup limits (best
/// effort), and local NVMe instance storage, mounted at /opt/dlami/nvme.
struct InstanceCaps {
  int vcpus = 0;           ///< 0 = no CPU limit
  double memory_gib = 0;   ///< 0 = no memory limit
  long nvme_gb = 0;        ///< local instance-store NVMe in GB; 0 = none
};

/// Interface and namespace names of the local provider (docs/nodes.md "Names"); each fits
/// the kernel's 15-byte interface-name limit.
struct LocalNames {
  /// `hfb` + 8 hex of SHA-256(fleet_id + cluster_id).
  static std::string Bridge(std::string_view fleet_id, std::string_view cluster_id);
  /// `hfv` + 10 hex of SHA-256(fleet_id + instance_id): host end of a node's veth.
  static std::string NodeVeth(std::string_view fleet_id, std::string_view instance_id);
  /// `hf-<fleet-id>-<instance-id>`: the node's network namespace in /run/netns.
  static std::string NodeNetns(std::string_view fleet_id, std::string_view instance_id);
  /// `hf-<fleet-id>-imds-<cluster-id>`: the cluster's IMDS namespace.
  static std::string ImdsNetns(std::string_view fleet_id, std::string_view cluster_id);
  /// `hfm` + 10 hex of SHA-256(fleet_id + "imds" + cluster_id): host end of the IMDS veth.
  static std::string ImdsVeth(std::string_view fleet_id, std::string_view cluster_id);
  /// `ip-a-b-c-d` for address a.b.c.d.
  static std::string Hostname(std::string_view ipv4);
};

/// What a local node can reach beyond its cluster (docs/nodes.md "Network").
enum class NodeEgress {
  kNat,    ///< a default route via the bridge host address; the host masquerades
  kProxy,  ///< no default route; the server's proxy settings reach the node
  kNone,   ///< nothing outside the cluster but the agent endpoint (and the apt proxy)
};

/// The `local` provider. Thread-safe; launch() and terminate() return at once and the work
/// runs on worker threads, which the destructor joins (nodes keep running after it).
class LocalProvider final : public Provider {
 public:
  struct Options {
    std::string data_dir;     ///< nodes and clusters live under <data_dir>/local/
    std::string image_rootfs; ///< read-only node image root (overlay lower layer)
    /// The EKS node image's root, for specs with image_variant kEks (node_image.h); empty =
    /// such launches fail (FailedPrecondition in the instance's message).
    std::string eks_image_rootfs;
    /// When eks_image_rootfs is empty: finds (or builds) the EKS node image and returns its
    /// root, asked by the first launch that needs it (on a launch worker, one at a time; an
    /// answer that is ok is kept). Empty: such launches fail as above.
    std::function<StatusOr<std::string>()> eks_image;
    std::string region = "us-west-2";
    std::string node_network = "10.224.0.0/12";  ///< pool of per-cluster /22 subnets
    uint16_t agent_port = 9081;  ///< agent endpoint port on every bridge host address
    /// Served on <bridge host address>:agent_port for every cluster; none when empty.
    http::HttpHandler agent_handler;
    /// Agent token of an instance, written to the node's /etc/hyperfleet/agent.env.
    std::function<std::string(std::string_view instance_id)> agent_token;
    /// CPU/memory of an instance type ("ml.c5.xlarge"); no limits when empty or unknown.
    std::function<std::optional<InstanceCaps>(std::string_view instance_type)> instance_caps;
    /// The hyperfleet binary bound read-only at /opt/hyperfleet/bin/hyperfleet in every
    /// node; empty = realpath of /proc/self/exe.
    std::string hyperfleet_binary;
    /// Command that runs the supervisor; the node directory is appended. Empty =
    /// {hyperfleet_binary, "node-supervisor"}.
    std::vector<std::string> supervisor_command;
    uint16_t apt_proxy_port = 0;  ///< 0 = no apt proxy file in nodes
    /// The local registry's port on the host (ImageRegistry): let through the firewall from
    /// nodes to the bridge host address; 0 = none.
    uint16_t registry_port = 0;
    /// TCP ports (first, last) nodes may reach on any address of this host: the EKS control
    /// planes' apiservers, which the kubelets of EKS nodes talk to (their kubeconfigs name
    /// the host's main address; the route there is the node's default route, so nodes need
    /// NodeEgress::kNat). {0, 0}: none.
    std::pair<uint16_t, uint16_t> kubernetes_api_ports{0, 0};
    /// Nodes' egress. `hyperfleet server` defaults to kNat; this struct to kNone.
    NodeEgress node_egress = NodeEgress::kNone;
    /// Proxy variables for nodes (http_proxy, https_proxy, no_proxy, upper-case too), e.g.
    /// the server's environment; a proxy on loopback is reached at the bridge host address.
    std::map<std::string, std::string> proxy_environment;
    /// kNat: when not empty, the only IPv4 destinations (CIDRs or addresses, "a.b.c.d/n")
    /// nodes reach beyond the host, plus their DNS resolvers on port 53; empty = anywhere.
    std::vector<std::string> node_egress_allow;
    int stop_timeout_seconds = 20;  ///< clean poweroff budget before the node is killed
  };

  /// Checks the host (root, systemd-nspawn, ip, nft), makes <data_dir>/local/fleet-id, and
  /// re-adopts the nodes of an earlier run (docs/nodes.md "A node's life" step 5).
  /// Errors: FailedPrecondition without root or without a required program (naming its
  /// Debian package); InvalidArgument for a malformed node_network or proxy variable, or
  /// kProxy without an http(s)_proxy; Internal for an
  /// unwritable data dir.
  static StatusOr<std::unique_ptr<LocalProvider>> Create(const Options& options);
  ~LocalProvider() override;

  // hf::provider::Provider
  std::string_view name() const override { return "local"; }
  Status launch(const InstanceSpec& spec) override;
  Status terminate(std::string_view instance_id) override;
  /// Asks the node's systemd to reboot (SIGINT, as `machinectl reboot`); nspawn then exits
  /// with 133 and the supervisor boots the node again on the same disk.
  Status reboot(std::string_view instance_id) override;
  /// Kills the node's supervisor and every process of the node (SIGKILL), then removes it.
  Status terminateNow(std::string_view instance_id) override;
  /// Kills whatever runs of the node (SIGKILL) and boots it again on the same disk.
  /// Errors: NotFound (unknown), FailedPrecondition (still setting up, or terminating).
  Status powerCycle(std::string_view instance_id) override;
  StatusOr<std::vector<InstanceObservation>> list(std::string_view cluster_id) override;
  bool runsLifecycleScripts() const override { return true; }
  StatusOr<int> nodeInitPid(std::string_view instance_id) override;
  /// Host routes on the cluster's bridge, `ip route replace <pod range> via <node> dev
  /// <bridge> proto 151`; ours no longer wanted are deleted, and all go with the bridge.
  /// Errors: InvalidArgument for a range over the cluster subnet or a gateway outside it.
  Status setPodRoutes(std::string_view cluster_id, const std::vector<PodRoute>& routes) override;

  /// This data dir's fleet id (6 hex).
  const std::string& fleetId() const { return fleet_id_; }
  /// <data_dir>/local/nodes/<instance_id>.
  std::string nodeDir(std::string_view instance_id) const;
  /// Host pid of the node's supervisor, if it runs.
  std::optional<int> supervisorPidForTest(std::string_view instance_id) const;

 private:
  class Impl;
  explicit LocalProvider(const Options& options);

  std::unique_ptr<Impl> impl_;
  std::string fleet_id_;
};

/// Where a node sees the host's srun --auto-resume SPANK plugin (bind-mounted read-only from
/// hyperfleet_auto_resume.so next to the hyperfleet binary, when the build has one).
inline constexpr const char* kAutoResumePluginPath = "/opt/hyperfleet/lib/hyperfleet_auto_resume.so";

/// Runs the node supervisor for <node_dir> (the hidden `hyperfleet node-supervisor`
/// subcommand): joins the node's cgroups, applies its caps, runs systemd-nspawn, relaunches
/// it after a reboot (exit status 133), and on SIGTERM powers the node off (SIGRTMIN+4 to
/// its systemd, SIGKILL after the stop timeout). Returns the process exit status.
int RunNodeSupervisor(const std::string& node_dir);

}  // namespace hf::provider
