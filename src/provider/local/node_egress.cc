#include "provider/local/node_egress.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "hyperfleet/common/ipv4.h"

namespace hf::provider::local {
namespace {

// Debian's abseil has its own string_view.
absl::string_view A(std::string_view s) { return absl::string_view(s.data(), s.size()); }

constexpr const char* kProxyVariables[] = {"http_proxy", "HTTP_PROXY", "https_proxy",
                                           "HTTPS_PROXY", "no_proxy", "NO_PROXY"};

bool IsProxyVariable(std::string_view key) {
  return std::find(std::begin(kProxyVariables), std::end(kProxyVariables), key) !=
         std::end(kProxyVariables);
}

std::string Lookup(const std::vector<std::pair<std::string, std::string>>& env,
                   std::string_view key) {
  for (const auto& [k, v] : env) {
    if (k == key) return v;
  }
  return "";
}

}  // namespace

bool ProxyUrl::OnHostLoopback() const {
  if (host == "localhost" || host == "::1") return true;
  auto ip = ParseIpv4(host);
  return ip && (*ip >> 24) == 127;
}

std::string ProxyUrl::Render(std::string_view host_override) const {
  std::string h = host_override.empty() ? host : std::string(host_override);
  if (h.find(':') != std::string::npos) h = "[" + h + "]";
  return absl::StrCat(scheme, "://", userinfo.empty() ? "" : userinfo + "@", h, ":", port);
}

StatusOr<ProxyUrl> ParseProxyUrl(std::string_view variable, std::string_view text) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(variable), " \"", std::string(text),
                     "\" is not a usable proxy URL: ", std::string(why)));
  };
  for (char c : text) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f || c == '"' || c == '\\') {
      return bad("it holds spaces, quotes or control characters");
    }
  }
  ProxyUrl url;
  absl::string_view rest = A(text);
  if (auto pos = rest.find("://"); pos != absl::string_view::npos) {
    url.scheme = absl::AsciiStrToLower(rest.substr(0, pos));
    rest.remove_prefix(pos + 3);
  }
  if (url.scheme != "http" && url.scheme != "https") return bad("the scheme must be http or https");
  rest = rest.substr(0, rest.find('/'));  // a path after the authority means nothing here
  if (auto at = rest.rfind('@'); at != absl::string_view::npos) {
    url.userinfo = std::string(rest.substr(0, at));
    rest.remove_prefix(at + 1);
  }
  absl::string_view port;
  if (absl::ConsumePrefix(&rest, "[")) {
    const auto close = rest.find(']');
    if (close == absl::string_view::npos) return bad("an unclosed [");
    url.host = std::string(rest.substr(0, close));
    rest.remove_prefix(close + 1);
    if (url.host != "::1") return bad("nodes have no IPv6: only [::1] (the host) is allowed");
    if (!rest.empty() && !absl::ConsumePrefix(&rest, ":")) return bad("junk after ]");
    port = rest;
  } else {
    const auto colon = rest.find(':');
    url.host = std::string(rest.substr(0, colon));
    if (colon != absl::string_view::npos) port = rest.substr(colon + 1);
  }
  if (url.host.empty()) return bad("no host");
  for (char c : url.host) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '-' && c != '_' && c != ':') {
      return bad("the host has a character other than letters, digits, '.', '-' and '_'");
    }
  }
  int number = url.scheme == "https" ? 443 : 80;
  if (!port.empty() && (!absl::SimpleAtoi(port, &number) || number < 1 || number > 65535)) {
    return bad("the port is not a number from 1 to 65535");
  }
  url.port = static_cast<uint16_t>(number);
  return url;
}

StatusOr<ProxySettings> ProxySettingsFrom(const std::map<std::string, std::string>& env) {
  auto value = [&](const char* lower, const char* upper) -> std::pair<std::string, std::string> {
    for (const char* key : {lower, upper}) {
      auto it = env.find(key);
      if (it != env.end() && !it->second.empty()) return {key, it->second};
    }
    return {"", ""};
  };
  ProxySettings out;
  if (auto [key, text] = value("http_proxy", "HTTP_PROXY"); !text.empty()) {
    HF_ASSIGN_OR_RETURN(out.http, ParseProxyUrl(key, text));
  }
  if (auto [key, text] = value("https_proxy", "HTTPS_PROXY"); !text.empty()) {
    HF_ASSIGN_OR_RETURN(out.https, ParseProxyUrl(key, text));
  }
  out.no_proxy = value("no_proxy", "NO_PROXY").second;
  return out;
}

std::vector<uint16_t> HostProxyPorts(const ProxySettings& proxies) {
  std::set<uint16_t> ports;
  for (const auto* p : {&proxies.http, &proxies.https}) {
    if (*p && (*p)->OnHostLoopback()) ports.insert((*p)->port);
  }
  return {ports.begin(), ports.end()};
}

std::vector<TcpEndpoint> RemoteProxies(const ProxySettings& proxies) {
  std::set<std::pair<std::string, uint16_t>> seen;
  for (const auto* p : {&proxies.http, &proxies.https}) {
    if (*p && !(*p)->OnHostLoopback() && ParseIpv4((*p)->host)) {
      seen.insert({(*p)->host, (*p)->port});
    }
  }
  std::vector<TcpEndpoint> out;
  for (const auto& [ip, port] : seen) out.push_back({ip, port});
  return out;
}

std::vector<std::pair<std::string, std::string>> NodeProxyEnvironment(
    const ProxySettings& proxies, const NodeNetwork& net) {
  std::vector<std::pair<std::string, std::string>> env;
  if (!proxies.any()) return env;
  auto url = [&](const ProxyUrl& p) {
    return p.Render(p.OnHostLoopback() ? std::string_view(net.host_ip) : std::string_view());
  };
  if (proxies.http) {
    env.emplace_back("http_proxy", url(*proxies.http));
    env.emplace_back("HTTP_PROXY", url(*proxies.http));
  }
  if (proxies.https) {
    env.emplace_back("https_proxy", url(*proxies.https));
    env.emplace_back("HTTPS_PROXY", url(*proxies.https));
  }
  std::vector<std::string> entries = {"localhost", "127.0.0.1", "::1", "169.254.169.254",
                                      net.host_ip, net.subnet, ".compute.internal"};
  for (absl::string_view e : absl::StrSplit(proxies.no_proxy, ',', absl::SkipWhitespace())) {
    const std::string entry(absl::StripAsciiWhitespace(e));
    if (std::find(entries.begin(), entries.end(), entry) == entries.end()) {
      entries.push_back(entry);
    }
  }
  const std::string no_proxy = absl::StrJoin(entries, ",");
  env.emplace_back("no_proxy", no_proxy);
  env.emplace_back("NO_PROXY", no_proxy);
  return env;
}

std::string EditEtcEnvironment(std::string_view existing,
                               const std::vector<std::pair<std::string, std::string>>& env) {
  std::string out;
  std::vector<absl::string_view> lines = absl::StrSplit(A(existing), '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();  // the last line's newline
  for (absl::string_view line : lines) {
    absl::string_view key = absl::StripLeadingAsciiWhitespace(line);
    absl::ConsumePrefix(&key, "export ");
    key = absl::StripAsciiWhitespace(key.substr(0, key.find('=')));
    if (!IsProxyVariable(std::string_view(key.data(), key.size()))) {
      absl::StrAppend(&out, line, "\n");
    }
  }
  for (const auto& [k, v] : env) absl::StrAppend(&out, k, "=", v, "\n");
  return out;
}

std::string AptProxyConf(const std::vector<std::pair<std::string, std::string>>& env,
                         uint16_t apt_proxy_port, std::string_view host_ip) {
  std::string lines;
  if (apt_proxy_port != 0) {
    absl::StrAppend(&lines, "Acquire::http::Proxy \"http://", std::string(host_ip), ":",
                    apt_proxy_port, "/\";\n");
  } else if (auto http = Lookup(env, "http_proxy"); !http.empty()) {
    absl::StrAppend(&lines, "Acquire::http::Proxy \"", http, "/\";\n");
  }
  if (auto https = Lookup(env, "https_proxy"); !https.empty()) {
    absl::StrAppend(&lines, "Acquire::https::Proxy \"", https, "/\";\n");
  }
  if (lines.empty()) return "";
  return "// Written by Hyperfleet at every boot (docs/nodes.md \"Network\").\n" + lines;
}

std::string PipConf(const std::vector<std::pair<std::string, std::string>>& env) {
  std::string proxy = Lookup(env, "https_proxy");
  if (proxy.empty()) proxy = Lookup(env, "http_proxy");
  if (proxy.empty()) return "";
  return absl::StrCat(kPipConfMarker, "\n[global]\nproxy = ", proxy, "\n");
}

std::string ResolvConf(NodeEgress egress, std::string_view host, std::string_view upstream,
                       std::string* note) {
  if (egress != NodeEgress::kNat) {
    return egress == NodeEgress::kNone
               ? "# local nodes have no DNS server (--node-egress none, docs/nodes.md)\n"
               : "# no DNS server: names outside the cluster resolve at the proxy "
                 "(--node-egress proxy, docs/nodes.md)\n";
  }
  auto usable = [](std::string_view text) {
    std::vector<std::string> out;
    for (absl::string_view line : absl::StrSplit(A(text), '\n')) {
      std::vector<absl::string_view> f =
          absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
      if (f.size() < 2 || f[0] != "nameserver") continue;
      auto ip = ParseIpv4(std::string_view(f[1].data(), f[1].size()));
      // Nodes have no IPv6, and a loopback address is the node's own.
      if (ip && (*ip >> 24) != 127 && *ip != 0 && out.size() < 3) out.emplace_back(f[1]);
    }
    return out;
  };
  std::vector<std::string> servers = usable(host);
  std::string source = "the host's /etc/resolv.conf";
  if (servers.empty()) {
    servers = usable(upstream);
    source = "systemd-resolved's upstream servers (/run/systemd/resolve/resolv.conf)";
  }
  if (servers.empty()) {
    if (note) {
      *note = "neither the host's /etc/resolv.conf nor /run/systemd/resolve/resolv.conf "
              "names an IPv4 nameserver that nodes can reach (loopback stubs cannot be); "
              "nodes get no DNS server";
    }
    return "# no usable DNS server on the host (docs/nodes.md \"Network\")\n";
  }
  std::string out = absl::StrCat("# from ", source, " (docs/nodes.md \"Network\")\n");
  for (const auto& s : servers) absl::StrAppend(&out, "nameserver ", s, "\n");
  return out;
}

std::vector<std::string> Nameservers(std::string_view resolv_conf) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(A(resolv_conf), '\n')) {
    std::vector<absl::string_view> f =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (f.size() >= 2 && f[0] == "nameserver" &&
        ParseIpv4(std::string_view(f[1].data(), f[1].size()))) {
      out.emplace_back(f[1]);
    }
  }
  return out;
}

std::vector<std::vector<std::string>> NodeRoutes(NodeEgress egress, std::string_view host_ip,
                                                 const std::vector<TcpEndpoint>& remote_proxies) {
  const std::string via(host_ip);
  std::vector<std::vector<std::string>> routes = {{"10.254.254.254/32", "via", via},
                                                  {"169.254.169.254/32", "dev", "eth0"}};
  if (egress == NodeEgress::kNat) {
    routes.push_back({"default", "via", via});
    return routes;
  }
  if (egress == NodeEgress::kProxy) {
    std::set<std::string> seen;
    for (const auto& p : remote_proxies) {
      if (seen.insert(p.ipv4).second) routes.push_back({p.ipv4 + "/32", "via", via});
    }
  }
  routes.push_back({"unreachable", "default"});
  return routes;
}

}  // namespace hf::provider::local
