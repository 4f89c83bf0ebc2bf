// The local provider's node address pool (src/provider/local/address_pool.h): which addresses
// of a cluster's /22 a node may have and which one a new node gets, by table. Pure, no root.
#include "provider/local/address_pool.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hyperfleet/common/ipv4.h"

namespace hf::provider::local {
namespace {

const uint32_t kBase = *ParseIpv4("10.224.4.0");

TEST(AddressPool, NodeAddressesOfTheSubnet) {
  struct Case {
    const char* ip;
    bool node_address;
  };
  const std::vector<Case> cases = {
      {"10.224.4.0", false},    // the network
      {"10.224.4.1", false},    // the bridge's host address
      {"10.224.4.2", true},     // the first node
      {"10.224.5.0", true},
      {"10.224.7.254", true},   // the last node
      {"10.224.7.255", false},  // the IMDS namespace's own address
      {"10.224.8.2", false},    // the next cluster's
      {"10.224.3.255", false},
      {"", false},
      {"10.224.4", false},
      {"not an address", false},
  };
  const AddressPool pool(kBase);
  for (const Case& c : cases) {
    const Status st = pool.CheckNodeAddress(c.ip);
    EXPECT_EQ(st.ok(), c.node_address) << c.ip;
    if (!c.node_address) {
      EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.ip;
      EXPECT_EQ(st.message(), std::string("requested address ") + c.ip +
                                  " is not a node address of 10.224.4.0/22");
    }
  }
}

TEST(AddressPool, AllocatesTheLowestFreeAddress) {
  struct Case {
    std::vector<std::string> listed;  // addresses of the cluster's listed nodes
    std::string next;                 // what a new node gets
  };
  const std::vector<Case> cases = {
      {{}, "10.224.4.2"},
      {{"10.224.4.2"}, "10.224.4.3"},
      {{"10.224.4.3"}, "10.224.4.2"},  // a hole is filled first
      {{"10.224.4.2", "10.224.4.3", "10.224.4.5"}, "10.224.4.4"},
      {{"10.224.4.2", "10.224.4.2"}, "10.224.4.3"},  // listed twice takes one
      // Nothing outside the node range takes an address: not yet placed (""), the host's,
      // another cluster's, or malformed.
      {{"", "10.224.4.1", "10.224.8.2", "bad"}, "10.224.4.2"},
  };
  for (const Case& c : cases) {
    AddressPool pool(kBase);
    for (const auto& ip : c.listed) pool.Adopt(ip);
    auto got = pool.Allocate();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, c.next);
  }
}

TEST(AddressPool, AllocateTakesReleaseFrees) {
  AddressPool pool(kBase);
  EXPECT_EQ(pool.Allocate().value_or(""), "10.224.4.2");
  EXPECT_EQ(pool.Allocate().value_or(""), "10.224.4.3");
  EXPECT_EQ(pool.taken(), 2u);
  pool.Release("10.224.4.2");
  pool.Release("10.224.4.9");  // not taken: nothing
  EXPECT_EQ(pool.taken(), 1u);
  EXPECT_EQ(pool.Allocate().value_or(""), "10.224.4.2");
}

TEST(AddressPool, ExhaustedAfterEveryNodeAddress) {
  AddressPool pool(kBase);
  std::string last;
  for (int i = 0; i < 1021; ++i) {  // 1,024 addresses less network, host and IMDS
    auto ip = pool.Allocate();
    ASSERT_TRUE(ip.ok()) << i << ": " << ip.status();
    last = *ip;
  }
  EXPECT_EQ(last, "10.224.7.254");
  auto none = pool.Allocate();
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(none.status().message(), "no free address left in the cluster's subnet");
  pool.Release("10.224.5.17");
  EXPECT_EQ(pool.Allocate().value_or(""), "10.224.5.17");
}

}  // namespace
}  // namespace hf::provider::local
