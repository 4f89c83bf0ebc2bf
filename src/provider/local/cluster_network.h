#pragma once
// The host side of local nodes' egress and isolation (docs/nodes.md "Network"): the fleet's
// nftables table, IPv4 forwarding, and the egress files written into a node. The deciding
// parts are the pure functions of firewall.h and node_egress.h.
#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hyperfleet/common/file_lock.h"
#include "hyperfleet/common/status.h"
#include "hyperfleet/provider/local_provider.h"
#include "provider/local/firewall.h"
#include "provider/local/node_egress.h"

namespace hf::provider::local {

inline constexpr int kSubnetBits = 22;  ///< one /22 per cluster (docs/nodes.md "Network")
inline constexpr uint32_t kSubnetSize = 1u << (32 - kSubnetBits);

/// True when network namespace `ns` exists (/run/netns/<ns>).
bool NetnsExists(const std::string& ns);
/// True when network interface `dev` exists.
bool LinkExists(const std::string& dev);

/// Holds flock(/run/hyperfleet/network.lock) while it lives: one server of this host at a
/// time chooses a cluster subnet or turns IPv4 forwarding on or off.
class HostNetworkLock {
 public:
  /// Blocks until the lock is ours. Errors: Internal when the lock file cannot be opened.
  static StatusOr<HostNetworkLock> Acquire();

 private:
  explicit HostNetworkLock(FileLock lock) : lock_(std::move(lock)) {}
  FileLock lock_;
};

/// A free /22 of `pool` (a CIDR) for a new cluster: one that overlaps no address or route
/// of the host (`ip -j`) and no subnet in `clusters_dir`/*/network.json. Call under
/// /run/hyperfleet/network.lock. Errors: InvalidArgument (pool not a CIDR of /22 or
/// larger), ResourceExhausted (none free), Internal (ip failed).
StatusOr<uint32_t> ChooseClusterSubnet(const std::string& pool, const std::string& clusters_dir);

/// Makes the cluster bridge `bridge` (if missing) with a fixed MAC from its name, the host
/// address `host_ip`/22, and sets it up. Idempotent. Errors: Internal naming the command.
Status EnsureClusterBridge(const std::string& bridge, const std::string& host_ip);

/// Makes a node's network namespace `ns` afresh: veth `veth` on `bridge` (eth0 inside, with
/// `ip`/22), lo up, and `routes` (`ip route add` arguments). Errors: Internal.
Status SetUpNodeNetns(const std::string& ns, const std::string& veth, const std::string& bridge,
                      const std::string& ip, const std::vector<std::vector<std::string>>& routes);

/// The routing protocol number that marks Hyperfleet's pod routes (`ip route ... proto
/// 151`; unnamed in rt_protos, used by no routing daemon we know).
inline constexpr int kPodRouteProtocol = 151;
/// The priority of the `ip rule` that sends what comes in from a cluster bridge to that
/// cluster's pod route table: before the main table (32766).
inline constexpr int kPodRouteRulePriority = 30000;

/// The routing table of the pod routes of the cluster whose subnet starts at `subnet_base`:
/// 0x48000000 + the subnet's /22 number, so distinct for every cluster subnet of this host
/// (subnets are host-wide unique) and clear of the usual tables (main 254, local 255).
/// Pods of two EKS clusters, of one server or of two, may have the same pod ranges; their
/// routes never meet, since each table is only looked up for packets from its own bridge.
uint32_t PodRouteTable(uint32_t subnet_base);

/// The `ip` commands that turn our pod routes `present` (in the cluster's table, subnet
/// `subnet_base`/22, bridge `bridge`) into `wanted`: `ip -4 route replace <cidr> via <ip> dev
/// <bridge> table <T> proto 151` for each wanted route absent or going elsewhere, then `ip -4
/// route del <cidr> table <T> proto 151` for each present range no longer wanted. Pure.
/// Errors: InvalidArgument naming the route when a pod range is not a normalised
/// "a.b.c.d/n" or overlaps the cluster subnet, or a node address is not a node's of that
/// subnet, or a range comes twice.
StatusOr<std::vector<std::vector<std::string>>> PodRouteCommands(
    const std::vector<PodRoute>& present, const std::vector<PodRoute>& wanted,
    const std::string& bridge, uint32_t subnet_base);

/// Our pod routes in `table` now (`ip -j -4 route show table <T> proto 151`).
/// Errors: Internal naming the command.
StatusOr<std::vector<PodRoute>> PodRoutesIn(uint32_t table);

/// Makes the rule `ip rule add iif <bridge> lookup <table> priority 30000` unless it is
/// there (`ip -j -4 rule show`). Errors: Internal naming the command.
Status EnsurePodRouteRule(const std::string& bridge, uint32_t table);

/// Deletes every rule of ours for `bridge` (its table's routes go with the bridge; rules do
/// not). Best effort.
void RemovePodRouteRules(const std::string& bridge);

/// A data dir's egress settings, checked once at start.
struct EgressConfig {
  NodeEgress egress = NodeEgress::kNone;
  uint16_t agent_port = 0;
  uint16_t apt_proxy_port = 0;
  uint16_t registry_port = 0;  ///< LocalProvider::Options'; 0: none
  std::pair<uint16_t, uint16_t> kubernetes_api_ports{0, 0};  ///< LocalProvider::Options'
  ProxySettings proxies;  ///< kProxy: proxy host names already resolved to IPv4 addresses
  std::string region;
  std::vector<std::string> allow;  ///< kNat: allowed destinations, "a.b.c.d/n" (normalised)
};

/// Checks the Options' egress settings; with kProxy resolves proxy host names (IPv4, once).
/// Errors: InvalidArgument for a malformed proxy variable, kProxy without a proxy, or a
/// node_egress_allow entry that is no IPv4 CIDR (or is given without kNat);
/// FailedPrecondition when a proxy's name does not resolve.
StatusOr<EgressConfig> MakeEgressConfig(const LocalProvider::Options& options);

/// One data dir's cluster networks on this host. Thread-safe as far as the provider needs:
/// Apply() runs under the provider's cluster lock.
class ClusterNetworks {
 public:
  /// `root` is <data-dir>/local (clusters/*/network.json and firewall.nft live there).
  ClusterNetworks(EgressConfig config, std::string fleet_id, std::string root);

  /// Rewrites the fleet's nftables table from every clusters/*/network.json (the script is
  /// kept at <root>/firewall.nft) and, host-wide under /run/hyperfleet/network.lock, turns
  /// IPv4 forwarding on when the rules need it (remembered in /run/hyperfleet/ip_forward.on),
  /// or back off when Hyperfleet turned it on and no Hyperfleet bridge ("hfb*") is left.
  /// Errors: Internal naming nft's complaint.
  Status Apply();

  /// `ip route add` arguments for a node of the cluster whose bridge host address is
  /// `host_ip` (NodeRoutes()).
  std::vector<std::vector<std::string>> NodeRoutes(const std::string& host_ip) const;

  /// Writes the node's /etc/resolv.conf and its proxy settings (/etc/environment,
  /// /etc/apt/apt.conf.d/00hyperfleet-proxy, /etc/pip.conf unless the user wrote one) into
  /// the node root `merged`; files that no longer apply are removed. Never follows a link
  /// out of the node's tree.
  Status WriteNodeFiles(const std::string& merged, const NodeNetwork& net);

  /// Lines for the node's /etc/hyperfleet/agent.env: the proxy variables that the agent
  /// passes to lifecycle scripts ("" without a proxy).
  std::string AgentEnvLines(const NodeNetwork& net) const;

  const EgressConfig& config() const { return config_; }

 private:
  FirewallSpec Spec() const;
  /// The resolv.conf nodes get (ResolvConf over the host's files); `note` as ResolvConf's.
  std::string NodeResolvConf(std::string* note) const;
  Status SetForwarding(bool needed);

  const EgressConfig config_;
  const std::string fleet_id_;
  const std::string root_;
  std::atomic<bool> resolv_note_logged_{false};
};

}  // namespace hf::provider::local
