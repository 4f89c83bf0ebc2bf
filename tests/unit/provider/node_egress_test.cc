// What a local node is told about egress (src/provider/local/node_egress.h): proxy URLs,
// the node's proxy variables and files, resolv.conf, routes. Hand-computed tables.
#include "provider/local/node_egress.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace hf::provider::local {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

const NodeNetwork kNet{"10.224.4.1", "10.224.4.0/22", "us-west-2"};

TEST(ProxyUrlTest, ParsesAndNormalises) {
  struct Case {
    std::string text, rendered;
    bool loopback;
  };
  const Case cases[] = {
      {"http://proxy.corp:3128", "http://proxy.corp:3128", false},
      {"proxy.corp:3128", "http://proxy.corp:3128", false},
      {"HTTP://192.0.2.10:8080/", "http://192.0.2.10:8080", false},
      {"https://u:p%40ss@192.0.2.10", "https://u:p%40ss@192.0.2.10:443", false},
      {"http://proxy.corp", "http://proxy.corp:80", false},
      {"http://127.0.0.1:3128", "http://127.0.0.1:3128", true},
      {"http://127.9.9.9:3128/path", "http://127.9.9.9:3128", true},
      {"http://localhost:3128", "http://localhost:3128", true},
      {"http://[::1]:3128", "http://[::1]:3128", true},
  };
  for (const auto& c : cases) {
    auto url = ParseProxyUrl("http_proxy", c.text);
    ASSERT_TRUE(url.ok()) << c.text << ": " << url.status();
    EXPECT_EQ(url->Render(), c.rendered) << c.text;
    EXPECT_EQ(url->OnHostLoopback(), c.loopback) << c.text;
  }
  EXPECT_EQ(ParseProxyUrl("x", "http://127.0.0.1:3128")->Render("10.224.4.1"),
            "http://10.224.4.1:3128");
}

TEST(ProxyUrlTest, RefusesWhatNodesCannotUseNamingTheVariable) {
  for (const std::string text : {"socks5://proxy:1080", "http://:3128", "http://proxy:0",
                                 "http://proxy:65536", "http://proxy:port", "http://pro xy:1",
                                 "http://[2001:db8::1]:3128", "http://[::1", "http://pr\"oxy:1",
                                 "http://pro/xy:1", "http://proxy:1\n"}) {
    auto url = ParseProxyUrl("HTTPS_PROXY", text);
    if (text == "http://pro/xy:1") {  // a path after the authority means nothing
      EXPECT_EQ(url->Render(), "http://pro:80");
      continue;
    }
    ASSERT_FALSE(url.ok()) << text;
    EXPECT_EQ(url.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(url.status().message()).find("HTTPS_PROXY"), std::string::npos);
  }
}

TEST(ProxySettingsTest, LowerCaseWinsAndEmptyCountsAsUnset) {
  auto s = ProxySettingsFrom({{"http_proxy", "http://a:1"},
                              {"HTTP_PROXY", "http://b:2"},
                              {"https_proxy", ""},
                              {"HTTPS_PROXY", "http://c:3"},
                              {"NO_PROXY", "corp.example"}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->http->Render(), "http://a:1");
  EXPECT_EQ(s->https->Render(), "http://c:3");
  EXPECT_EQ(s->no_proxy, "corp.example");
  EXPECT_FALSE(ProxySettingsFrom({})->any());
  EXPECT_FALSE(ProxySettingsFrom({{"https_proxy", "ftp://x:1"}}).ok());
}

TEST(ProxySettingsTest, EndpointsOnTheHostAndElsewhere) {
  auto s = ProxySettingsFrom({{"http_proxy", "http://127.0.0.1:3128"},
                              {"https_proxy", "http://192.0.2.10:8080"}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(HostProxyPorts(*s), (std::vector<uint16_t>{3128}));
  const auto remote = RemoteProxies(*s);
  ASSERT_EQ(remote.size(), 1u);
  EXPECT_EQ(remote[0].ipv4, "192.0.2.10");
  EXPECT_EQ(remote[0].port, 8080);
  // A name is no endpoint until resolved (MakeEgressConfig does, for --node-egress proxy).
  EXPECT_TRUE(RemoteProxies(*ProxySettingsFrom({{"http_proxy", "http://proxy.corp:3128"}}))
                  .empty());
}

TEST(NodeProxyEnvironmentTest, LoopbackBecomesTheBridgeAndTheClusterStaysDirect) {
  auto s = ProxySettingsFrom({{"http_proxy", "http://127.0.0.1:3128"},
                              {"https_proxy", "http://192.0.2.10:8080"},
                              {"no_proxy", "corp.example, localhost,,10.0.0.0/8"}});
  ASSERT_TRUE(s.ok());
  const std::string no_proxy =
      "localhost,127.0.0.1,::1,169.254.169.254,10.224.4.1,10.224.4.0/22,.compute.internal,"
      "corp.example,10.0.0.0/8";
  EXPECT_EQ(NodeProxyEnvironment(*s, kNet),
            (Env{{"http_proxy", "http://10.224.4.1:3128"},
                 {"HTTP_PROXY", "http://10.224.4.1:3128"},
                 {"https_proxy", "http://192.0.2.10:8080"},
                 {"HTTPS_PROXY", "http://192.0.2.10:8080"},
                 {"no_proxy", no_proxy},
                 {"NO_PROXY", no_proxy}}));
  EXPECT_TRUE(NodeProxyEnvironment(ProxySettings{}, kNet).empty());
}

TEST(NodeFilesTest, EtcEnvironmentKeepsOtherLinesAndReplacesProxies) {
  const Env env = {{"http_proxy", "http://10.224.4.1:3128"}};
  EXPECT_EQ(EditEtcEnvironment("LANG=C\n\nexport https_proxy=old\nHTTP_PROXY=old\nX=1", env),
            "LANG=C\n\nX=1\nhttp_proxy=http://10.224.4.1:3128\n");
  EXPECT_EQ(EditEtcEnvironment("LANG=C\nhttp_proxy=old\n", {}), "LANG=C\n");
  EXPECT_EQ(EditEtcEnvironment("", {}), "");
  EXPECT_EQ(EditEtcEnvironment("LANG=C\n", {}), "LANG=C\n");
}

TEST(NodeFilesTest, AptProxy) {
  const Env env = {{"http_proxy", "http://192.0.2.10:3128"},
                   {"https_proxy", "http://192.0.2.10:3129"}};
  const std::string header =
      "// Written by Hyperfleet at every boot (docs/nodes.md \"Network\").\n";
  EXPECT_EQ(AptProxyConf(env, 0, "10.224.4.1"),
            header + "Acquire::http::Proxy \"http://192.0.2.10:3128/\";\n"
                     "Acquire::https::Proxy \"http://192.0.2.10:3129/\";\n");
  // --node-apt-proxy-port (apt-cacher-ng on the host) wins for http.
  EXPECT_EQ(AptProxyConf(env, 3142, "10.224.4.1"),
            header + "Acquire::http::Proxy \"http://10.224.4.1:3142/\";\n"
                     "Acquire::https::Proxy \"http://192.0.2.10:3129/\";\n");
  EXPECT_EQ(AptProxyConf({}, 3142, "10.224.4.1"),
            header + "Acquire::http::Proxy \"http://10.224.4.1:3142/\";\n");
  EXPECT_EQ(AptProxyConf({}, 0, "10.224.4.1"), "");
}

TEST(NodeFilesTest, PipPrefersTheHttpsProxy) {
  const std::string head = std::string(kPipConfMarker) + "\n[global]\nproxy = ";
  EXPECT_EQ(PipConf({{"http_proxy", "http://a:1"}, {"https_proxy", "http://b:2"}}),
            head + "http://b:2\n");
  EXPECT_EQ(PipConf({{"http_proxy", "http://a:1"}}), head + "http://a:1\n");
  EXPECT_EQ(PipConf({}), "");
}

TEST(ResolvConfTest, NatTakesTheHostsUsableServers) {
  struct Case {
    std::string host, upstream, servers;  // servers: the nameserver lines expected
    bool note;
  };
  const Case cases[] = {
      {"nameserver 10.255.255.53\n", "", "nameserver 10.255.255.53\n", false},
      // systemd-resolved's stub: its upstream list instead; IPv6 servers are unusable.
      {"nameserver 127.0.0.53\noptions edns0\n",
       "nameserver 2001:db8::53\nnameserver 192.0.2.53\n", "nameserver 192.0.2.53\n", false},
      {"# c\nsearch corp\nnameserver\tfe80::1\nnameserver 192.0.2.1\nnameserver 192.0.2.2\n"
       "nameserver 192.0.2.3\nnameserver 192.0.2.4\n",
       "", "nameserver 192.0.2.1\nnameserver 192.0.2.2\nnameserver 192.0.2.3\n", false},
      {"nameserver 127.0.0.1\n", "", "", true},
      {"", "", "", true},
  };
  for (const auto& c : cases) {
    std::string note;
    const std::string out = ResolvConf(NodeEgress::kNat, c.host, c.upstream, &note);
    std::string servers;
    for (size_t pos = out.find("nameserver"); pos != std::string::npos;
         pos = out.find("nameserver", pos + 1)) {
      servers += out.substr(pos, out.find('\n', pos) + 1 - pos);
    }
    EXPECT_EQ(servers, c.servers) << c.host;
    EXPECT_EQ(!note.empty(), c.note) << c.host;
    EXPECT_EQ(out.front(), '#');
  }
}

TEST(ResolvConfTest, NameserversAreTheIpv4ServerLines) {
  EXPECT_EQ(Nameservers("# c\nnameserver 10.0.0.2\nsearch x\nnameserver ::1\n"
                        "nameserver\t192.0.2.53 \noptions ndots:1\n"),
            (std::vector<std::string>{"10.0.0.2", "192.0.2.53"}));
  EXPECT_TRUE(Nameservers("# local nodes have no DNS server\n").empty());
}

TEST(ResolvConfTest, NoneAndProxyHaveNoServer) {
  for (NodeEgress e : {NodeEgress::kNone, NodeEgress::kProxy}) {
    std::string note;
    const std::string out = ResolvConf(e, "nameserver 10.255.255.53\n", "", &note);
    EXPECT_EQ(out.find("nameserver"), std::string::npos);
    EXPECT_EQ(out.find('\n'), out.size() - 1);  // one comment line
    EXPECT_TRUE(note.empty());
  }
}

TEST(NodeRoutesTest, PerMode) {
  using Routes = std::vector<std::vector<std::string>>;
  const Routes common = {{"10.254.254.254/32", "via", "10.224.4.1"},
                         {"169.254.169.254/32", "dev", "eth0"}};
  auto with = [&](Routes more) {
    Routes r = common;
    r.insert(r.end(), more.begin(), more.end());
    return r;
  };
  const std::vector<TcpEndpoint> remote = {{"192.0.2.10", 3128}, {"192.0.2.10", 3129}};
  EXPECT_EQ(NodeRoutes(NodeEgress::kNat, "10.224.4.1", remote),
            with({{"default", "via", "10.224.4.1"}}));
  EXPECT_EQ(NodeRoutes(NodeEgress::kNone, "10.224.4.1", {}), with({{"unreachable", "default"}}));
  EXPECT_EQ(NodeRoutes(NodeEgress::kProxy, "10.224.4.1", remote),
            with({{"192.0.2.10/32", "via", "10.224.4.1"}, {"unreachable", "default"}}));
}

}  // namespace
}  // namespace hf::provider::local
