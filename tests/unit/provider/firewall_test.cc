// The node isolation rules (src/provider/local/firewall.h): rendered scripts for each egress
// mode, checked against hand-written expectations; as root with nft installed, nft also
// checks that every rendered script parses (`nft -c`, which changes nothing).
#include "provider/local/firewall.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/subprocess.h"

namespace hf::provider::local {
namespace {

ClusterSubnet A() { return {"c-a", "hfb0000aaaa", "10.224.4.0/22", "10.224.4.1"}; }
ClusterSubnet B() { return {"c-b", "hfb0000bbbb", "10.224.8.0/22", "10.224.8.1"}; }

FirewallSpec Spec(NodeEgress egress, std::vector<ClusterSubnet> clusters) {
  FirewallSpec s;
  s.fleet_id = "abc123";
  s.egress = egress;
  s.agent_port = 9081;
  s.clusters = std::move(clusters);
  return s;
}

bool Has(const std::string& text, const std::string& line) {
  return text.find("\t\t" + line + "\n") != std::string::npos;
}

TEST(FirewallTest, TableIsPerFleet) {
  EXPECT_EQ(FirewallTable("abc123"), "hyperfleet-abc123");
}

TEST(FirewallTest, NoClusterOnlyDeletesTheTable) {
  const std::string s = RenderFirewall(Spec(NodeEgress::kNat, {}));
  EXPECT_EQ(s.substr(s.find('\n') + 1),
            "table inet hyperfleet-abc123\ndelete table inet hyperfleet-abc123\n");
  EXPECT_FALSE(NeedsForwarding(Spec(NodeEgress::kNat, {})));
}

TEST(FirewallTest, NatOneClusterWholeScript) {
  const std::string expected =
      "# Hyperfleet's node isolation for fleet abc123 (docs/nodes.md \"Network\"), rewritten "
      "whole at every change.\n"
      "table inet hyperfleet-abc123\n"
      "delete table inet hyperfleet-abc123\n"
      "table inet hyperfleet-abc123 {\n"
      "\tchain input {\n"
      "\t\ttype filter hook input priority filter; policy accept;\n"
      "\t\tiifname \"hfb0000aaaa\" ct state established,related accept\n"
      "\t\tiifname \"hfb0000aaaa\" ip daddr 10.224.4.1 tcp dport { 9081 } accept\n"
      "\t\tiifname \"hfb0000aaaa\" drop\n"
      "\t}\n"
      "\tchain forward {\n"
      "\t\ttype filter hook forward priority filter; policy accept;\n"
      "\t\t# cluster c-a: 10.224.4.0/22\n"
      "\t\tiifname \"hfb0000aaaa\" oifname \"hfb0000aaaa\" accept\n"
      "\t\toifname \"hfb0000aaaa\" ct state established,related accept\n"
      "\t\toifname \"hfb0000aaaa\" drop\n"
      "\t\tiifname \"hfb0000aaaa\" oifname \"hfb*\" drop\n"
      "\t\tiifname \"hfb0000aaaa\" accept\n"
      "\t}\n"
      "\tchain postrouting {\n"
      "\t\ttype nat hook postrouting priority srcnat; policy accept;\n"
      "\t\tip saddr 10.224.4.0/22 oifname != \"hfb*\" masquerade\n"
      "\t}\n"
      "}\n";
  EXPECT_EQ(RenderFirewall(Spec(NodeEgress::kNat, {A()})), expected);
  EXPECT_TRUE(NeedsForwarding(Spec(NodeEgress::kNat, {A()})));
}

TEST(FirewallTest, SeveralClustersAreEachKeptApartInAnyOrder) {
  const std::string s = RenderFirewall(Spec(NodeEgress::kNat, {B(), A()}));
  EXPECT_EQ(s, RenderFirewall(Spec(NodeEgress::kNat, {A(), B()})));
  for (const auto& c : {A(), B()}) {
    const std::string b = "\"" + c.bridge + "\"";
    // Each bridge reaches only its own host address, and only the agent port.
    EXPECT_TRUE(Has(s, "iifname " + b + " ip daddr " + c.host_ip + " tcp dport { 9081 } accept"));
    EXPECT_TRUE(Has(s, "iifname " + b + " drop")) << c.bridge;
    // Nothing enters the cluster but replies; nothing leaves it for another cluster.
    EXPECT_TRUE(Has(s, "oifname " + b + " drop"));
    EXPECT_TRUE(Has(s, "iifname " + b + " oifname \"hfb*\" drop"));
    EXPECT_TRUE(Has(s, "ip saddr " + c.subnet + " oifname != \"hfb*\" masquerade"));
  }
  // Within a cluster, bridged traffic (br_netfilter) passes before any of those drops.
  EXPECT_LT(s.find("iifname \"hfb0000aaaa\" oifname \"hfb0000aaaa\" accept"),
            s.find("oifname \"hfb0000aaaa\" drop"));
  EXPECT_LT(s.find("oifname \"hfb0000aaaa\" ct state established,related accept"),
            s.find("oifname \"hfb0000aaaa\" drop"));
  EXPECT_LT(s.find("iifname \"hfb0000aaaa\" oifname \"hfb*\" drop"),
            s.find("\t\tiifname \"hfb0000aaaa\" accept\n"));
  EXPECT_EQ(s.find("10.224.4.1 tcp dport { 9081 } accept\n\t\tiifname \"hfb0000bbbb\""),
            std::string::npos);
}

TEST(FirewallTest, NoneDropsEverythingOutwardsAndNeedsNoForwarding) {
  const FirewallSpec spec = Spec(NodeEgress::kNone, {A()});
  const std::string s = RenderFirewall(spec);
  EXPECT_FALSE(NeedsForwarding(spec));
  EXPECT_EQ(s.find("postrouting"), std::string::npos);
  EXPECT_EQ(s.find("masquerade"), std::string::npos);
  EXPECT_TRUE(Has(s, "iifname \"hfb0000aaaa\" oifname \"hfb*\" drop\n"
                     "\t\tiifname \"hfb0000aaaa\" drop"));
  EXPECT_FALSE(Has(s, "iifname \"hfb0000aaaa\" accept"));
}

TEST(FirewallTest, ProxyPassesOnlyToTheRemoteProxies) {
  FirewallSpec spec = Spec(NodeEgress::kProxy, {A()});
  EXPECT_FALSE(NeedsForwarding(spec));  // proxies on the host only: nothing is forwarded
  EXPECT_EQ(RenderFirewall(spec).find("masquerade"), std::string::npos);
  spec.remote_proxies = {{"192.0.2.10", 3128}};
  EXPECT_TRUE(NeedsForwarding(spec));
  const std::string s = RenderFirewall(spec);
  EXPECT_TRUE(Has(s, "iifname \"hfb0000aaaa\" ip daddr 192.0.2.10 tcp dport 3128 accept\n"
                     "\t\tiifname \"hfb0000aaaa\" drop"));
  EXPECT_TRUE(Has(s, "ip saddr 10.224.4.0/22 oifname != \"hfb*\" ip daddr 192.0.2.10 tcp dport "
                     "3128 masquerade"));
  EXPECT_FALSE(Has(s, "ip saddr 10.224.4.0/22 oifname != \"hfb*\" masquerade"));
}

TEST(FirewallTest, NatWithAnAllowListPassesOnlyThereAndToTheResolvers) {
  FirewallSpec spec = Spec(NodeEgress::kNat, {A()});
  spec.egress_allow = {"151.101.2.132/32", "192.0.2.0/24"};
  spec.resolvers = {"10.255.255.53"};
  EXPECT_TRUE(NeedsForwarding(spec));
  const std::string s = RenderFirewall(spec);
  EXPECT_TRUE(Has(s, "iifname \"hfb0000aaaa\" ip daddr { 151.101.2.132/32, 192.0.2.0/24 } accept\n"
                     "\t\tiifname \"hfb0000aaaa\" ip daddr { 10.255.255.53 } meta l4proto "
                     "{ tcp, udp } th dport 53 accept\n"
                     "\t\tiifname \"hfb0000aaaa\" drop"));
  EXPECT_FALSE(Has(s, "iifname \"hfb0000aaaa\" accept"));
  EXPECT_TRUE(Has(s, "ip saddr 10.224.4.0/22 oifname != \"hfb*\" masquerade"));
  // Without an allow list, outwards is open (no drop after the bridge rules).
  EXPECT_TRUE(Has(RenderFirewall(Spec(NodeEgress::kNat, {A()})), "iifname \"hfb0000aaaa\" accept"));
}

TEST(FirewallTest, HostPortsJoinTheAgentPortSortedOnce) {
  FirewallSpec spec = Spec(NodeEgress::kNone, {A()});
  spec.host_ports = {3142, 3128, 0, 3142, 9081};
  EXPECT_TRUE(Has(RenderFirewall(spec),
                  "iifname \"hfb0000aaaa\" ip daddr 10.224.4.1 tcp dport { 3128, 3142, 9081 } "
                  "accept"));
}

// EKS nodes' kubelets reach the control planes' apiservers on the host's main address.
TEST(FirewallTest, LocalPortsAreOpenOnEveryHostAddressBeforeTheDrop) {
  FirewallSpec spec = Spec(NodeEgress::kNat, {A()});
  EXPECT_FALSE(Has(RenderFirewall(spec), "fib daddr type local"));
  spec.local_ports_first = 26000;
  spec.local_ports_last = 26999;
  const std::string rules = RenderFirewall(spec);
  const std::string open =
      "iifname \"hfb0000aaaa\" fib daddr type local tcp dport 26000-26999 accept";
  ASSERT_TRUE(Has(rules, open)) << rules;
  EXPECT_LT(rules.find(open), rules.find("iifname \"hfb0000aaaa\" drop")) << rules;
}

TEST(FirewallTest, NftParsesEveryRenderedScript) {
  if (geteuid() != 0 || !FindProgram("nft")) GTEST_SKIP() << "needs root and nft";
  FirewallSpec proxy = Spec(NodeEgress::kProxy, {A(), B()});
  proxy.remote_proxies = {{"192.0.2.10", 3128}};
  proxy.host_ports = {3142};
  FirewallSpec allow = Spec(NodeEgress::kNat, {A(), B()});
  allow.egress_allow = {"151.101.2.132/32", "192.0.2.0/24"};
  allow.resolvers = {"10.255.255.53", "192.0.2.53"};
  allow.local_ports_first = 26000;
  allow.local_ports_last = 26999;
  for (const FirewallSpec& spec : {Spec(NodeEgress::kNat, {A(), B()}), allow,
                                   Spec(NodeEgress::kNone, {A()}), proxy,
                                   Spec(NodeEgress::kNat, {})}) {
    char path[] = "/tmp/hf-firewall-test-XXXXXX";
    const int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    close(fd);
    ASSERT_TRUE(WriteFileAtomically(path, RenderFirewall(spec), 0600).ok());
    auto r = RunCapture({"nft", "-c", "-f", path});
    unlink(path);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->exit.exit_code, 0) << r->out << RenderFirewall(spec);
  }
}

}  // namespace
}  // namespace hf::provider::local
