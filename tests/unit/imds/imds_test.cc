// IMDSv2's answers (include/hyperfleet/imds/imds.h), decided from the request,
// the asking node and an injected time: tokens, their expiry, and what a node reads. Pure,
// no root.
#include "hyperfleet/imds/imds.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>

namespace hf::imds {
namespace {

using std::chrono::seconds;
const auto kT0 = std::chrono::steady_clock::time_point() + std::chrono::hours(1);

http::HttpRequest Req(std::string method, std::string target, http::Headers headers = {},
                      std::string remote = "10.224.4.2") {
  http::HttpRequest r;
  r.method = std::move(method);
  r.target = std::move(target);
  r.headers = std::move(headers);
  r.remote_address = std::move(remote);
  return r;
}

std::optional<ImdsNode> NodeAt(std::string_view remote) {
  if (remote != "10.224.4.2") return std::nullopt;
  return ImdsNode{"i-0abc", "ml.c5.xlarge", "10.224.4.2", "ip-10-224-4-2"};
}

std::string Header(const http::HttpResponse& r, std::string_view name) {
  for (const auto& [k, v] : r.headers) {
    if (http::HeaderNameEquals(k, name)) return v;
  }
  return "";
}

// A token for 60 s, drawn at kT0.
std::string Token(ImdsTokens& tokens) {
  auto r = ImdsResponse(Req("PUT", "/latest/api/token",
                            {{"X-aws-ec2-metadata-token-ttl-seconds", "60"}}),
                        tokens, NodeAt, "us-west-2", kT0);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Header(r, "X-aws-ec2-metadata-token-ttl-seconds"), "60");
  EXPECT_EQ(r.body.size(), 48u);  // 24 random bytes as hex
  return r.body;
}

TEST(Imds, TokenRequests) {
  struct Case {
    std::string method;
    std::string ttl;  // "" = no header
    int status;
  };
  const Case cases[] = {{"PUT", "1", 200},     {"PUT", "21600", 200}, {"PUT", "0", 400},
                        {"PUT", "21601", 400}, {"PUT", "x", 400},     {"PUT", "", 400},
                        {"GET", "60", 405},    {"POST", "60", 405}};
  for (const Case& c : cases) {
    ImdsTokens tokens;
    http::Headers h;
    if (!c.ttl.empty()) h.emplace_back("X-aws-ec2-metadata-token-ttl-seconds", c.ttl);
    auto r = ImdsResponse(Req(c.method, "/latest/api/token", h), tokens, NodeAt, "us-west-2", kT0);
    EXPECT_EQ(r.status, c.status) << c.method << " ttl " << c.ttl;
  }
  ImdsTokens tokens;
  EXPECT_NE(Token(tokens), Token(tokens));  // drawn afresh every time
}

TEST(Imds, MetadataNeedsAValidToken) {
  ImdsTokens tokens;
  const std::string token = Token(tokens);
  auto get = [&](http::Headers h, std::chrono::steady_clock::time_point at,
                 std::string method = "GET") {
    return ImdsResponse(Req(method, "/latest/meta-data/instance-id", std::move(h)), tokens,
                        NodeAt, "us-west-2", at)
        .status;
  };
  EXPECT_EQ(get({}, kT0), 401);
  EXPECT_EQ(get({{"X-aws-ec2-metadata-token", "not-a-token"}}, kT0), 401);
  EXPECT_EQ(get({{"X-aws-ec2-metadata-token", token}}, kT0), 200);
  EXPECT_EQ(get({{"X-aws-ec2-metadata-token", token}}, kT0 + seconds(60)), 200);  // its last second
  EXPECT_EQ(get({{"X-aws-ec2-metadata-token", token}}, kT0 + seconds(61)), 401);  // expired
  EXPECT_EQ(get({{"X-aws-ec2-metadata-token", token}}, kT0, "HEAD"), 200);
  EXPECT_EQ(get({{"X-aws-ec2-metadata-token", token}}, kT0, "DELETE"), 405);
}

TEST(Imds, WhatANodeReads) {
  ImdsTokens tokens;
  const http::Headers h = {{"X-aws-ec2-metadata-token", Token(tokens)}};
  struct Case {
    std::string path;
    int status;
    std::string body;
  };
  const Case cases[] = {
      {"/latest/meta-data/instance-id", 200, "i-0abc"},
      {"/latest/meta-data/instance-type", 200, "c5.xlarge"},  // without "ml."
      {"/latest/meta-data/local-ipv4", 200, "10.224.4.2"},
      {"/latest/meta-data/hostname", 200, "ip-10-224-4-2.us-west-2.compute.internal"},
      {"/latest/meta-data/local-hostname", 200, "ip-10-224-4-2.us-west-2.compute.internal"},
      {"/latest/meta-data/placement/availability-zone", 200, "us-west-2a"},
      {"/latest/meta-data/placement/region", 200, "us-west-2"},
      {"/latest/meta-data/", 200,
       "hostname\ninstance-id\ninstance-type\nlocal-hostname\nlocal-ipv4\nplacement/"},
      {"/latest/meta-data", 200,
       "hostname\ninstance-id\ninstance-type\nlocal-hostname\nlocal-ipv4\nplacement/"},
      {"/latest/meta-data/placement", 200, "availability-zone\nregion"},
      {"/latest/meta-data/placement/", 200, "availability-zone\nregion"},
      {"/latest/meta-data/instance-id?x=1", 200, "i-0abc"},
      {"/latest/meta-data/ami-id", 404, ""},
      {"/latest/user-data", 404, ""},
  };
  for (const Case& c : cases) {
    auto r = ImdsResponse(Req("GET", c.path, h), tokens, NodeAt, "us-west-2", kT0);
    EXPECT_EQ(r.status, c.status) << c.path;
    EXPECT_EQ(r.body, c.body) << c.path;
    EXPECT_EQ(Header(r, "Content-Type"), "text/plain") << c.path;
  }
  // A caller that is no node of the cluster learns nothing.
  auto r = ImdsResponse(Req("GET", "/latest/meta-data/instance-id", h, "10.224.4.3"), tokens,
                        NodeAt, "us-west-2", kT0);
  EXPECT_EQ(r.status, 404);
}

}  // namespace
}  // namespace hf::imds
