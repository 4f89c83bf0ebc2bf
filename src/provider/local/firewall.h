#pragma once
// The nftables rules that isolate one data dir's local clusters (docs/nodes.md "Network"):
// a pure renderer here, applied with `nft -f` by cluster_network.cc.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/provider/local_provider.h"

namespace hf::provider::local {

/// One cluster network, as in <data-dir>/local/clusters/<id>/network.json.
struct ClusterSubnet {
  std::string cluster_id;
  std::string bridge;   ///< e.g. "hfb1a2b3c4d"
  std::string subnet;   ///< "a.b.c.0/22"
  std::string host_ip;  ///< the bridge host address, "a.b.c.1"
};

/// An IPv4 TCP endpoint (a proxy outside the host).
struct TcpEndpoint {
  std::string ipv4;
  uint16_t port = 0;
};

/// Everything the rules of one fleet (one data dir) depend on.
struct FirewallSpec {
  std::string fleet_id;  ///< 6 hex; names the table
  NodeEgress egress = NodeEgress::kNone;
  uint16_t agent_port = 0;
  /// More TCP ports of the host that a node reaches at its own bridge host address (the
  /// apt proxy, proxies listening on the host).
  std::vector<uint16_t> host_ports;
  /// TCP ports first..last that a node reaches on every address of the host (the EKS
  /// control planes' apiservers, which authenticate each client; their kubeconfigs name the
  /// host's main address); first 0: none.
  uint16_t local_ports_first = 0;
  uint16_t local_ports_last = 0;
  /// kProxy: the only destinations beyond the host that nodes reach (masqueraded).
  std::vector<TcpEndpoint> remote_proxies;
  /// kNat: when not empty, the only destinations beyond the host ("a.b.c.d/n"), besides
  /// `resolvers` on port 53 (UDP and TCP); empty = anywhere.
  std::vector<std::string> egress_allow;
  std::vector<std::string> resolvers;  ///< IPv4 addresses of the nodes' nameservers
  std::vector<ClusterSubnet> clusters;  ///< any order (rendered sorted by bridge)
};

/// "hyperfleet-<fleet-id>": the fleet's table in family inet.
std::string FirewallTable(std::string_view fleet_id);

/// True when the spec's nodes have traffic routed beyond the host (kNat, or kProxy with
/// remote proxies) and there is at least one cluster: the host needs IPv4 forwarding.
bool NeedsForwarding(const FirewallSpec& spec);

/// An `nft -f` script that replaces the fleet's table in one transaction, so applying it
/// again changes nothing; with no clusters it only deletes the table. Per cluster bridge B
/// (host address H, subnet S):
///   input:   from B only replies, TCP to H on the agent port and `host_ports`, and TCP to
///            any of the host's addresses on local_ports_first..last;
///   forward: B to B (bridged, seen with br_netfilter) passes; into B only replies; B to any
///            Hyperfleet bridge ("hfb*", any fleet) is dropped; B outwards passes (kNat; with
///            `egress_allow`, only to those prefixes and to the resolvers' port 53),
///            passes only to the remote proxies (kProxy) or is dropped (kNone);
///   postrouting (nat): S leaving through a non-bridge interface is masqueraded (kNat; kProxy
///            only towards the remote proxies).
/// Drops are final for the packet; accepts only end this table's say (other tables still see
/// the packet), so the table never opens what another firewall closes.
std::string RenderFirewall(const FirewallSpec& spec);

}  // namespace hf::provider::local
