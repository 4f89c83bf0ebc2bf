// The local provider's pod routes (src/provider/local/cluster_network.h PodRouteCommands):
// the `ip` commands from what is there and what is wanted, and the routes refused.
#include <gtest/gtest.h>

#include "provider/local/cluster_network.h"

namespace hf::provider::local {
namespace {

using Argv = std::vector<std::string>;
constexpr uint32_t kBase = (10u << 24) | (224u << 16) | (4u << 8);  // 10.224.4.0/22

// 10.224.4.0/22 is /22 number 0x2b801 of the address space.
const std::string kTable = std::to_string(0x48000000u + 0x2b801u);

Argv Replace(const std::string& cidr, const std::string& via) {
  return {"ip", "-4", "route", "replace", cidr, "via", via, "dev", "hfb1",
          "table", kTable, "proto", "151"};
}
Argv Del(const std::string& cidr) {
  return {"ip", "-4", "route", "del", cidr, "table", kTable, "proto", "151"};
}

TEST(PodRouteTableTest, OnePerClusterSubnet) {
  EXPECT_EQ(std::to_string(PodRouteTable(kBase)), kTable);
  EXPECT_NE(PodRouteTable(kBase), PodRouteTable(kBase + (1u << 10)));  // the next /22
  EXPECT_GT(PodRouteTable(0), 255u);  // clear of main, local and default
}

TEST(PodRouteCommandsTest, Table) {
  struct Case {
    const char* what;
    std::vector<PodRoute> present, wanted;
    std::vector<Argv> want;
  };
  const std::vector<Case> cases = {
      {"nothing", {}, {}, {}},
      {"new routes",
       {},
       {{"10.200.0.0/24", "10.224.4.2"}, {"10.200.1.0/24", "10.224.4.3"}},
       {Replace("10.200.0.0/24", "10.224.4.2"), Replace("10.200.1.0/24", "10.224.4.3")}},
      {"in place: nothing to do",
       {{"10.200.0.0/24", "10.224.4.2"}},
       {{"10.200.0.0/24", "10.224.4.2"}},
       {}},
      {"a range moved to another node (a replacement took it)",
       {{"10.200.0.0/24", "10.224.4.2"}},
       {{"10.200.0.0/24", "10.224.4.9"}},
       {Replace("10.200.0.0/24", "10.224.4.9")}},
      {"stale ones of ours go",
       {{"10.200.0.0/24", "10.224.4.2"}, {"10.200.1.0/24", "10.224.4.3"}},
       {{"10.200.1.0/24", "10.224.4.3"}},
       {Del("10.200.0.0/24")}},
      {"all go",
       {{"10.200.0.0/24", "10.224.4.2"}},
       {},
       {Del("10.200.0.0/24")}},
  };
  for (const Case& c : cases) {
    auto got = PodRouteCommands(c.present, c.wanted, "hfb1", kBase);
    ASSERT_TRUE(got.ok()) << c.what << ": " << got.status();
    EXPECT_EQ(*got, c.want) << c.what;
  }
}

TEST(PodRouteCommandsTest, RefusesRoutesThatWouldTakeOtherAddresses) {
  for (const PodRoute& bad : std::vector<PodRoute>{
           {"10.200.0.0", "10.224.4.2"},      // no length
           {"10.200.0.5/24", "10.224.4.2"},   // not the network's address
           {"garbage", "10.224.4.2"},
           {"10.224.4.0/24", "10.224.4.2"},   // inside the cluster subnet
           {"10.224.0.0/12", "10.224.4.2"},   // over it
           {"0.0.0.0/0", "10.224.4.2"},       // the host's default route
           {"10.200.0.0/24", "10.224.8.2"},   // a node of another cluster
           {"10.200.0.0/24", "10.224.4.1"},   // the host's own bridge address
           {"10.200.0.0/24", "10.224.4.0"},
           {"10.200.0.0/24", "10.224.7.255"}, // the IMDS namespace's
           {"10.200.0.0/24", ""},
       }) {
    auto got = PodRouteCommands({}, {bad}, "hfb1", kBase);
    EXPECT_TRUE(absl::IsInvalidArgument(got.status()))
        << bad.pod_cidr << " via " << bad.node_ip << ": " << got.status();
  }
  auto twice = PodRouteCommands(
      {}, {{"10.200.0.0/24", "10.224.4.2"}, {"10.200.0.0/24", "10.224.4.3"}}, "hfb1", kBase);
  EXPECT_TRUE(absl::IsInvalidArgument(twice.status())) << twice.status();
  // The highest node address is fine.
  EXPECT_TRUE(PodRouteCommands({}, {{"10.200.0.0/24", "10.224.7.254"}}, "hfb1", kBase).ok());
}

}  // namespace
}  // namespace hf::provider::local
