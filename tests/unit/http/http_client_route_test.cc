// The HTTP client's pure part (http/http_client_route.h): URLs, no_proxy, and the proxy
// the environment names, by libcurl's rules.
#include "http/http_client_route.h"

#include <gtest/gtest.h>

#include <map>

#include "absl/strings/match.h"

namespace hf::http::client {
namespace {

TEST(ParseUrl, SplitsWhatAConnectionNeeds) {
  struct Case {
    std::string url, scheme, host;
    uint16_t port;
    std::string target, authority;
    bool ip;
  };
  const Case cases[] = {
      {"http://127.0.0.1:9080/x?y=1", "http", "127.0.0.1", 9080, "/x?y=1", "127.0.0.1:9080", true},
      {"HTTPS://Example.COM", "https", "example.com", 443, "/", "example.com", false},
      {"https://example.com:443/a", "https", "example.com", 443, "/a", "example.com", false},
      {"http://h?q", "http", "h", 80, "/?q", "h", false},
      {"http://[::1]:8080/p", "http", "::1", 8080, "/p", "[::1]:8080", true},
      {"https://[fd00::2]/", "https", "fd00::2", 443, "/", "[fd00::2]", true},
  };
  for (const Case& c : cases) {
    auto url = ParseUrl(c.url);
    ASSERT_TRUE(url.ok()) << c.url << ": " << url.status();
    EXPECT_EQ(url->scheme, c.scheme) << c.url;
    EXPECT_EQ(url->host, c.host) << c.url;
    EXPECT_EQ(url->port, c.port) << c.url;
    EXPECT_EQ(url->target, c.target) << c.url;
    EXPECT_EQ(url->Authority(false), c.authority) << c.url;
    EXPECT_EQ(url->host_is_ip, c.ip) << c.url;
  }
  EXPECT_EQ(ParseUrl("http://h/p")->Authority(true), "h:80");
  EXPECT_EQ(ParseUrl("http://h:81/p?q")->Absolute(), "http://h:81/p?q");
}

TEST(ParseUrl, RefusesWhatItCannotSend) {
  for (const char* bad : {"127.0.0.1:80/x", "ftp://h/x", "http:///x", "http://h:0/",
                          "http://h:65536/", "http://h:8x/", "http://u:p@h/", "http://h/#f",
                          "http://[::1/"}) {
    auto url = ParseUrl(bad);
    ASSERT_FALSE(url.ok()) << bad;
    EXPECT_EQ(url.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(url.status().message(), bad)) << url.status();
  }
}

TEST(NoProxyMatches, NamesDomainsAddressesAndBlocks) {
  struct Case {
    const char* list;
    const char* host;
    bool match;
  };
  const Case cases[] = {
      {"*", "anything.example", true},
      {"*", "10.1.2.3", true},
      {"example.com", "example.com", true},
      {"example.com", "api.example.com", true},
      {".example.com", "api.example.com", true},
      {".example.com", "example.com", true},
      {"example.com", "badexample.com", false},
      {"Example.COM", "API.example.com", true},
      {"example.com.", "example.com", true},
      {"a.test, b.test ,c.test", "b.test", true},
      {"a.test,,c.test", "b.test", false},
      {"localhost,127.0.0.1", "127.0.0.1", true},
      {"10.0.0.0/8", "10.250.3.4", true},
      {"10.0.0.0/8", "11.0.0.1", false},
      {"10.224.4.0/22", "10.224.7.255", true},
      {"10.224.4.0/22", "10.224.8.0", false},
      {"10.0.0.0/8", "ten.example", false},
      {"::1", "::1", true},
      {"fd00::/8", "fd12::1", true},
      {"fd00::/8", "10.0.0.1", false},
      {"10.0.0.0/40", "10.0.0.1", false},
      {"", "example.com", false},
      {"169.254.169.254", "169.254.169.254", true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(NoProxyMatches(c.list, c.host), c.match) << c.list << " vs " << c.host;
  }
}

class ProxyForTest : public ::testing::Test {
 protected:
  StatusOr<std::optional<Proxy>> For(const std::string& url) {
    return ProxyFor(*ParseUrl(url), [this](const char* name) -> std::optional<std::string> {
      auto it = env_.find(name);
      if (it == env_.end()) return std::nullopt;
      return it->second;
    });
  }
  std::map<std::string, std::string> env_;
};

TEST_F(ProxyForTest, PicksTheSchemesVariableByLibcurlsRules) {
  EXPECT_FALSE(For("http://h/")->has_value());
  env_ = {{"HTTP_PROXY", "http://upper:1"}};
  EXPECT_FALSE(For("http://h/")->has_value()) << "HTTP_PROXY is ignored (httpoxy)";
  env_ = {{"http_proxy", "http://lower:3128"}, {"HTTP_PROXY", "http://upper:1"}};
  auto p = For("http://h/");
  ASSERT_TRUE(p.ok() && p->has_value());
  EXPECT_EQ((*p)->host, "lower");
  EXPECT_EQ((*p)->port, 3128);
  EXPECT_EQ((*p)->variable, "http_proxy");
  EXPECT_FALSE(For("https://h/")->has_value()) << "http_proxy is for http only";

  env_ = {{"HTTPS_PROXY", "proxy.example:8080"}};
  p = For("https://h/");
  ASSERT_TRUE(p.ok() && p->has_value());
  EXPECT_EQ((*p)->variable, "HTTPS_PROXY");
  EXPECT_EQ((*p)->host, "proxy.example");
  env_ = {{"https_proxy", "http://a:1"}, {"HTTPS_PROXY", "http://b:2"}};
  EXPECT_EQ((*For("https://h/"))->host, "a") << "lower case first";

  env_ = {{"ALL_PROXY", "http://all:9"}};
  EXPECT_EQ((*For("http://h/"))->host, "all");
  EXPECT_EQ((*For("https://h/"))->variable, "ALL_PROXY");
  env_ = {{"https_proxy", ""}, {"all_proxy", "http://all:9"}};
  EXPECT_EQ((*For("https://h/"))->variable, "all_proxy") << "an empty variable is unset";
}

TEST_F(ProxyForTest, DefaultPortCredentialsAndNoProxy) {
  env_ = {{"http_proxy", "http://us%40r:p%3Ass@proxy/"}};
  auto p = For("http://h/");
  ASSERT_TRUE(p.ok() && p->has_value()) << p.status();
  EXPECT_EQ((*p)->port, 1080);
  EXPECT_EQ((*p)->authorization, "Basic dXNAcjpwOnNz");  // base64("us@r:p:ss")
  env_ = {{"http_proxy", "http://[::1]:3128"}};
  EXPECT_EQ((*For("http://h/"))->host, "::1");

  env_ = {{"http_proxy", "http://p:1"}, {"no_proxy", "127.0.0.1,.internal"}};
  EXPECT_FALSE(For("http://127.0.0.1:9080/")->has_value());
  EXPECT_FALSE(For("http://api.internal/")->has_value());
  EXPECT_TRUE(For("http://10.0.0.1/")->has_value());
  env_ = {{"http_proxy", "http://p:1"}, {"NO_PROXY", "*"}};
  EXPECT_FALSE(For("http://10.0.0.1/")->has_value());
  env_ = {{"http_proxy", "http://p:1"}, {"no_proxy", "x.test"}, {"NO_PROXY", "*"}};
  EXPECT_TRUE(For("http://10.0.0.1/")->has_value()) << "no_proxy wins over NO_PROXY";
}

TEST_F(ProxyForTest, RefusesProxiesItCannotUseNamingTheVariable) {
  for (const char* bad : {"socks5://p:1080", "https://p:443", "http://p:99999", "http://:8"}) {
    env_ = {{"https_proxy", bad}};
    auto p = For("https://h/");
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(p.status().message(), "https_proxy")) << p.status();
  }
}

}  // namespace
}  // namespace hf::http::client
