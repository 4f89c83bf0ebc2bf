#include "provider/local/firewall.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hf::provider::local {

std::string FirewallTable(std::string_view fleet_id) {
  return "hyperfleet-" + std::string(fleet_id);
}

bool NeedsForwarding(const FirewallSpec& spec) {
  if (spec.clusters.empty()) return false;
  return spec.egress == NodeEgress::kNat ||
         (spec.egress == NodeEgress::kProxy && !spec.remote_proxies.empty());
}

namespace {

// "tcp dport { 9081, 3142 }" for the agent port and the host ports, sorted and unique.
std::string HostPorts(const FirewallSpec& spec) {
  std::set<uint16_t> ports(spec.host_ports.begin(), spec.host_ports.end());
  ports.insert(spec.agent_port);
  ports.erase(0);
  return absl::StrCat("tcp dport { ", absl::StrJoin(ports, ", "), " }");
}

std::string Quoted(const std::string& name) { return "\"" + name + "\""; }

void InputRules(const FirewallSpec& spec, const ClusterSubnet& c, std::string& out) {
  const std::string in = "\t\tiifname " + Quoted(c.bridge);
  absl::StrAppend(&out, in, " ct state established,related accept\n");
  absl::StrAppend(&out, in, " ip daddr ", c.host_ip, " ", HostPorts(spec), " accept\n");
  if (spec.local_ports_first != 0) {
    absl::StrAppend(&out, in, " fib daddr type local tcp dport ", spec.local_ports_first, "-",
                    spec.local_ports_last, " accept\n");
  }
  absl::StrAppend(&out, in, " drop\n");
}

void ForwardRules(const FirewallSpec& spec, const ClusterSubnet& c, std::string& out) {
  const std::string b = Quoted(c.bridge);
  absl::StrAppend(&out, "\t\tiifname ", b, " oifname ", b, " accept\n");
  absl::StrAppend(&out, "\t\toifname ", b, " ct state established,related accept\n");
  absl::StrAppend(&out, "\t\toifname ", b, " drop\n");
  absl::StrAppend(&out, "\t\tiifname ", b, " oifname \"hfb*\" drop\n");
  switch (spec.egress) {
    case NodeEgress::kNat:
      if (spec.egress_allow.empty()) {
        absl::StrAppend(&out, "\t\tiifname ", b, " accept\n");
        break;
      }
      absl::StrAppend(&out, "\t\tiifname ", b, " ip daddr { ", absl::StrJoin(spec.egress_allow, ", "),
                      " } accept\n");
      if (!spec.resolvers.empty()) {
        absl::StrAppend(&out, "\t\tiifname ", b, " ip daddr { ", absl::StrJoin(spec.resolvers, ", "),
                        " } meta l4proto { tcp, udp } th dport 53 accept\n");
      }
      absl::StrAppend(&out, "\t\tiifname ", b, " drop\n");
      break;
    case NodeEgress::kProxy:
      for (const TcpEndpoint& p : spec.remote_proxies) {
        absl::StrAppend(&out, "\t\tiifname ", b, " ip daddr ", p.ipv4, " tcp dport ", p.port,
                        " accept\n");
      }
      absl::StrAppend(&out, "\t\tiifname ", b, " drop\n");
      break;
    case NodeEgress::kNone:
      absl::StrAppend(&out, "\t\tiifname ", b, " drop\n");
      break;
  }
}

void NatRules(const FirewallSpec& spec, const ClusterSubnet& c, std::string& out) {
  const std::string from = absl::StrCat("\t\tip saddr ", c.subnet, " oifname != \"hfb*\"");
  if (spec.egress == NodeEgress::kNat) {
    absl::StrAppend(&out, from, " masquerade\n");
  } else if (spec.egress == NodeEgress::kProxy) {
    for (const TcpEndpoint& p : spec.remote_proxies) {
      absl::StrAppend(&out, from, " ip daddr ", p.ipv4, " tcp dport ", p.port, " masquerade\n");
    }
  }
}

}  // namespace

std::string RenderFirewall(const FirewallSpec& spec) {
  const std::string table = "inet " + FirewallTable(spec.fleet_id);
  std::string out = absl::StrCat(
      "# Hyperfleet's node isolation for fleet ", spec.fleet_id,
      " (docs/nodes.md \"Network\"), rewritten whole at every change.\n",
      // Adding first makes the delete succeed when the table is absent.
      "table ", table, "\ndelete table ", table, "\n");
  if (spec.clusters.empty()) return out;
  std::vector<ClusterSubnet> clusters = spec.clusters;
  std::sort(clusters.begin(), clusters.end(),
            [](const ClusterSubnet& a, const ClusterSubnet& b) { return a.bridge < b.bridge; });
  absl::StrAppend(&out, "table ", table, " {\n");
  absl::StrAppend(&out, "\tchain input {\n",
                  "\t\ttype filter hook input priority filter; policy accept;\n");
  for (const auto& c : clusters) InputRules(spec, c, out);
  absl::StrAppend(&out, "\t}\n\tchain forward {\n",
                  "\t\ttype filter hook forward priority filter; policy accept;\n");
  for (const auto& c : clusters) {
    absl::StrAppend(&out, "\t\t# cluster ", c.cluster_id, ": ", c.subnet, "\n");
    ForwardRules(spec, c, out);
  }
  absl::StrAppend(&out, "\t}\n");
  if (NeedsForwarding(spec)) {
    absl::StrAppend(&out, "\tchain postrouting {\n",
                    "\t\ttype nat hook postrouting priority srcnat; policy accept;\n");
    for (const auto& c : clusters) NatRules(spec, c, out);
    absl::StrAppend(&out, "\t}\n");
  }
  absl::StrAppend(&out, "}\n");
  return out;
}

}  // namespace hf::provider::local
