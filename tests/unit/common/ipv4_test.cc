// The shared IPv4 helpers (hyperfleet/common/ipv4.h): parsing, overlap, and the choice of a
// free subnet (the local provider's cluster /22), by hand-computed cases.
#include "hyperfleet/common/ipv4.h"

#include <gtest/gtest.h>

#include <string>

namespace hf {
namespace {

TEST(Ipv4Test, ParsesAndPrints) {
  EXPECT_EQ(ParseIpv4("10.224.4.1"), 0x0ae00401u);
  EXPECT_EQ(Ipv4Text(0x0ae00401u), "10.224.4.1");
  EXPECT_FALSE(ParseIpv4("10.224.4"));
  EXPECT_FALSE(ParseIpv4("::1"));
  EXPECT_EQ(ParseIpv4Prefix("10.224.5.7/22"), (Ipv4Prefix{0x0ae00400u, 22}));
  EXPECT_EQ(ParseIpv4Prefix("192.0.2.1"), (Ipv4Prefix{0xc0000201u, 32}));
  for (const char* bad : {"10.0.0.0/33", "10.0.0.0/-1", "10.0.0.0/x", "10.0.0.0/", "x/8",
                          "10.0.0.0/ 8", "10.0.0.0/+8", "10.0.0.0/08", "10.0.0.0/8 ",
                          "10.0.0.0/008"}) {
    EXPECT_FALSE(ParseIpv4Prefix(bad)) << bad;
  }
  EXPECT_EQ(ParseIpv4Prefix("10.0.0.0/0"), (Ipv4Prefix{0u, 0}));
  // The text inet_pton would see ends at a NUL; the address must not.
  EXPECT_FALSE(ParseIpv4(std::string("10.0.0.1\0x", 10)));
  EXPECT_FALSE(ParseIpv4Prefix(std::string("10.0.0.0\0x/8", 12)));
  EXPECT_EQ(PrefixMask(0), 0u);
  EXPECT_EQ(PrefixMask(22), 0xfffffc00u);
  EXPECT_EQ(PrefixMask(32), 0xffffffffu);
}

TEST(Ipv4Test, Overlap) {
  const uint32_t a = *ParseIpv4("10.224.4.0");
  EXPECT_TRUE(PrefixesOverlap(a, 22, *ParseIpv4("10.224.7.255"), 32));
  EXPECT_FALSE(PrefixesOverlap(a, 22, *ParseIpv4("10.224.8.0"), 32));
  EXPECT_TRUE(PrefixesOverlap(a, 22, *ParseIpv4("10.0.0.0"), 8));
}

TEST(Ipv4Test, FirstFreeSubnetSkipsWhatIsTaken) {
  const Ipv4Prefix pool = *ParseIpv4Prefix("10.224.0.0/20");  // four /22s
  EXPECT_EQ(FirstFreeSubnet(pool, 22, {}), *ParseIpv4("10.224.0.0"));
  // The first taken by a host address, the second by a route inside it, the third free.
  EXPECT_EQ(FirstFreeSubnet(pool, 22, {*ParseIpv4Prefix("10.224.1.9/32"),
                                       *ParseIpv4Prefix("10.224.6.0/24")}),
            *ParseIpv4("10.224.8.0"));
  // A route covering the whole pool leaves nothing.
  EXPECT_FALSE(FirstFreeSubnet(pool, 22, {*ParseIpv4Prefix("10.0.0.0/8")}));
  EXPECT_FALSE(FirstFreeSubnet(pool, 16, {}));  // a /16 is larger than the pool
}

}  // namespace
}  // namespace hf
