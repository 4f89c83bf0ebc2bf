#pragma once
// What a local node is told about reaching beyond its cluster (docs/nodes.md "Network"):
// its routes, /etc/resolv.conf, and proxy settings. Pure functions; cluster_network.cc
// writes their results into the node.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hyperfleet/common/status.h"
#include "hyperfleet/provider/local_provider.h"
#include "provider/local/firewall.h"

namespace hf::provider::local {

/// A proxy URL of http_proxy / https_proxy, e.g. "http://user:pw@proxy.corp:3128/".
struct ProxyUrl {
  std::string scheme = "http";  ///< "http" or "https"
  std::string userinfo;         ///< "user:pw", or empty
  std::string host;             ///< a name or an IPv4 address (no brackets)
  uint16_t port = 0;            ///< as given, else 80 (http) / 443 (https)

  /// True for a proxy on the host's loopback (127.0.0.0/8, localhost, ::1): nodes reach it
  /// at their bridge host address instead.
  bool OnHostLoopback() const;
  /// "scheme://[userinfo@]host:port" with `host` replaced when non-empty.
  std::string Render(std::string_view host = {}) const;
};

/// Parses a proxy URL ("host:port" alone means http). `variable` names it in errors.
/// Errors: InvalidArgument (other schemes, no host, a bad port, spaces or control bytes).
StatusOr<ProxyUrl> ParseProxyUrl(std::string_view variable, std::string_view text);

/// The proxies of an environment; lower-case variables win over upper-case ones.
struct ProxySettings {
  std::optional<ProxyUrl> http, https;
  std::string no_proxy;  ///< as given (comma-separated)
  bool any() const { return http.has_value() || https.has_value(); }
};

/// Reads http_proxy, https_proxy, no_proxy (and HTTP_PROXY, HTTPS_PROXY, NO_PROXY) from
/// `env`; empty values count as unset. Errors: ParseProxyUrl's.
StatusOr<ProxySettings> ProxySettingsFrom(const std::map<std::string, std::string>& env);

/// TCP ports of the proxies on the host's loopback (sorted, unique).
std::vector<uint16_t> HostProxyPorts(const ProxySettings& proxies);

/// Proxies elsewhere whose host is an IPv4 address (sorted, unique).
std::vector<TcpEndpoint> RemoteProxies(const ProxySettings& proxies);

/// A node's view of its cluster network.
struct NodeNetwork {
  std::string host_ip;  ///< bridge host address
  std::string subnet;   ///< "a.b.c.0/22"
  std::string region;   ///< for the node's DNS domain <region>.compute.internal
};

/// The proxy variables a node's scripts and sessions get, in this order: http_proxy,
/// HTTP_PROXY, https_proxy, HTTPS_PROXY, no_proxy, NO_PROXY (only those that apply; none
/// without a proxy). Loopback proxies become the bridge host address. no_proxy always
/// keeps the node's own cluster direct (localhost, IMDS, the bridge host address, the
/// subnet, .compute.internal) before the user's entries.
std::vector<std::pair<std::string, std::string>> NodeProxyEnvironment(
    const ProxySettings& proxies, const NodeNetwork& net);

/// `existing` /etc/environment with its proxy variables replaced by `env` (appended; other
/// lines kept as they are).
std::string EditEtcEnvironment(std::string_view existing,
                               const std::vector<std::pair<std::string, std::string>>& env);

/// /etc/apt/apt.conf.d/00hyperfleet-proxy: the apt proxy on the bridge host address when
/// `apt_proxy_port` is set, else the http proxy of `env`; the https proxy of `env`. Empty
/// when apt has no proxy.
std::string AptProxyConf(const std::vector<std::pair<std::string, std::string>>& env,
                         uint16_t apt_proxy_port, std::string_view host_ip);

/// First line of the /etc/pip.conf Hyperfleet writes; a pip.conf without it is the user's.
inline constexpr const char kPipConfMarker[] =
    "# Written by Hyperfleet at every boot (docs/nodes.md \"Network\")";

/// /etc/pip.conf with the https proxy (else the http proxy) of `env`; empty without one.
std::string PipConf(const std::vector<std::pair<std::string, std::string>>& env);

/// /etc/resolv.conf of a node and, when no resolver could be used, a note saying why (for a
/// log line). kNat: the IPv4, non-loopback nameservers (at most 3) of the host's
/// /etc/resolv.conf (`host`), else those of systemd-resolved's upstream list (`upstream`,
/// /run/systemd/resolve/resolv.conf; empty when absent). kNone and kProxy: no server.
std::string ResolvConf(NodeEgress egress, std::string_view host, std::string_view upstream,
                       std::string* note);

/// The IPv4 addresses of the `nameserver` lines of a resolv.conf, in order.
std::vector<std::string> Nameservers(std::string_view resolv_conf);

/// The routes of a node (each the arguments after `ip route add`): 10.254.254.254/32 via the
/// bridge host address (scripts find their own address with it), IMDS on-link, then kNat:
/// default via the bridge host address; otherwise each remote proxy /32 via it and
/// `unreachable default` (downloads fail at once instead of hanging).
std::vector<std::vector<std::string>> NodeRoutes(NodeEgress egress, std::string_view host_ip,
                                                 const std::vector<TcpEndpoint>& remote_proxies);

}  // namespace hf::provider::local
