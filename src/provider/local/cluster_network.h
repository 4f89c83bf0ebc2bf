#pragma once
// The host side of local nodes' egress and isolation (docs/nodes.md "Network"): the fleet's
// nftables table, IPv4 forwarding, and the egress files written into a node. The deciding
// parts are the pure functions of firewall.h and node_egress.h.
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "hyperfleet/common/status.h"
#include "hyperfleet/provider/local_provider.h"
#include "provider/local/firewall.h"
#include "provider/local/node_egress.h"

namespace hf::provider::local {

/// A data dir's egress settings, checked once at start.
struct EgressConfig {
  NodeEgress egress = NodeEgress::kNone;
  uint16_t agent_port = 0;
  uint16_t apt_proxy_port = 0;
  ProxySettings proxies;  ///< kProxy: proxy host names already resolved to IPv4 addresses
  std::string region;
};

/// Checks the Options' egress settings; with kProxy resolves proxy host names (IPv4, once).
/// Errors: InvalidArgument for a malformed proxy variable or kProxy without a proxy;
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
  Status SetForwarding(bool needed);

  const EgressConfig config_;
  const std::string fleet_id_;
  const std::string root_;
  std::atomic<bool> resolv_note_logged_{false};
};

}  // namespace hf::provider::local
