// The server's flags checked before anything starts (cli/server_flags.h): listen addresses
// (IPv4, IPv6 with and without brackets), the URL forms other processes of this host use,
// and errors naming the flag.
#include "cli/server_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hf::cli {
namespace {
using ::testing::HasSubstr;

TEST(ParseListen, TakesIpv4AndIpv6WithOrWithoutBrackets) {
  struct Case {
    std::string listen, host;
    uint16_t port;
  };
  for (const Case& c : std::vector<Case>{{"127.0.0.1:9080", "127.0.0.1", 9080},
                                         {"0.0.0.0:0", "0.0.0.0", 0},
                                         {"[::1]:9080", "::1", 9080},
                                         {"::1:9080", "::1", 9080},
                                         {"[::]:80", "::", 80},
                                         {"localhost:1", "localhost", 1}}) {
    auto parsed = ParseListen(c.listen);
    ASSERT_TRUE(parsed.ok()) << c.listen << ": " << parsed.status();
    EXPECT_EQ(parsed->first, c.host) << c.listen;
    EXPECT_EQ(parsed->second, c.port) << c.listen;
  }
}

TEST(ParseListen, RefusesWhatIsNoHostAndPortNamingTheFlag) {
  for (const std::string bad : {"9080", ":9080", "host:", "host:65536", "host:x"}) {
    auto parsed = ParseListen(bad, "--agent-listen");
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr("--agent-listen")) << bad;
  }
}

TEST(LocalUrlHost, WildcardsAreLoopbackAndIpv6IsBracketed) {
  EXPECT_EQ(LocalUrlHost("0.0.0.0"), "127.0.0.1");
  EXPECT_EQ(LocalUrlHost(""), "127.0.0.1");
  EXPECT_EQ(LocalUrlHost("::"), "[::1]");
  EXPECT_EQ(LocalUrlHost("::1"), "[::1]");
  EXPECT_EQ(LocalUrlHost("fd00::5"), "[fd00::5]");
  EXPECT_EQ(LocalUrlHost("10.0.0.7"), "10.0.0.7");
  EXPECT_EQ(UrlHost("::"), "[::]");
  EXPECT_EQ(UrlHost("[::1]"), "[::1]");
}

TEST(CheckFlags, NamesTheFlagAtFault) {
  ServerFlags flags;
  flags.listen = "127.0.0.1:0";
  flags.provider = "local";
  ASSERT_TRUE(CheckFlags(flags).ok());

  ServerFlags v6 = flags;
  v6.listen = "[::1]:0";
  auto checked = CheckFlags(v6);
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_EQ(checked->listen.first, "::1");

  struct Case {
    void (*change)(ServerFlags&);
    std::string flag;
  };
  for (const Case& c : std::vector<Case>{
           {[](ServerFlags& f) { f.provider = "cloud"; }, "--provider"},
           {[](ServerFlags& f) { f.provider = "ssh"; }, "--agent-listen"},
           {[](ServerFlags& f) { f.agent_address = "10.0.0.1"; }, "--agent-address"},
           {[](ServerFlags& f) { f.access_key_id = "AKIA"; }, "--secret-access-key"},
           {[](ServerFlags& f) { f.kubernetes_fault_labels = "only-one"; },
            "--kubernetes-fault-labels"}}) {
    ServerFlags bad = flags;
    c.change(bad);
    auto result = CheckFlags(bad);
    ASSERT_FALSE(result.ok()) << c.flag;
    EXPECT_THAT(result.status().message(), HasSubstr(c.flag));
  }
}

}  // namespace
}  // namespace hf::cli
