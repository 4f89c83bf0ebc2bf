#include "provider/local/cluster_network.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <filesystem>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/ipv4.h"
#include "hyperfleet/common/subprocess.h"
#include "provider/local/address_pool.h"
#include "provider/local/sys.h"

namespace hf::provider::local {
namespace fs = std::filesystem;

namespace {

constexpr const char* kIpForward = "/proc/sys/net/ipv4/ip_forward";
constexpr const char* kForwardMarker = "/run/hyperfleet/ip_forward.on";

// The first IPv4 address of `name`, or "" (getaddrinfo, as the node's resolver would).
std::string ResolveIpv4(const std::string& name) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(name.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return "";
  char buf[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, buf, sizeof buf);
  freeaddrinfo(res);
  return buf;
}

bool AnyHyperfleetBridge() {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/sys/class/net", ec)) {
    if (absl::StartsWith(e.path().filename().string(), "hfb")) return true;
  }
  return false;
}

// `path` (inside the node root `merged`) when its directory, links resolved, is still inside
// the node's tree; a node's root could otherwise point /etc/apt at a host directory.
bool InsideNode(const std::string& merged, const std::string& path) {
  std::error_code ec;
  const fs::path dir = fs::weakly_canonical(fs::path(path).parent_path(), ec);
  const fs::path root = fs::weakly_canonical(merged, ec);
  return !ec && absl::StartsWith(dir.string() + "/", root.string() + "/");
}

// The node file's text when it is a regular file (not a link), else "".
std::string ReadNodeFile(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(path, ec))) return "";
  auto text = ReadFile(path);
  return text.ok() ? *text : "";
}

// Writes `value` to a /proc/sys file (no temporary file there).
bool WriteSysctl(const char* path, const char* value) {
  return WriteKernelFile(path, value).ok();
}

// Writes `text` to the node file `path`, or removes it when `text` is empty and `remove`.
Status PutNodeFile(const std::string& merged, const std::string& path, const std::string& text,
                   bool remove = true) {
  if (!InsideNode(merged, path)) {
    spdlog::warn("local provider: {} leads out of the node's tree; not written", path);
    return absl::OkStatus();
  }
  std::error_code ec;
  if (text.empty() && remove) {
    fs::remove(path, ec);
    return absl::OkStatus();
  }
  fs::create_directories(fs::path(path).parent_path(), ec);
  return WriteFileAtomically(path, text, 0644);
}

}  // namespace

StatusOr<HostNetworkLock> HostNetworkLock::Acquire() {
  HF_RETURN_IF_ERROR(MakeDirs("/run/hyperfleet"));
  HF_ASSIGN_OR_RETURN(FileLock lock, FileLock::Acquire("/run/hyperfleet/network.lock", 0600));
  return HostNetworkLock(std::move(lock));
}

bool NetnsExists(const std::string& ns) { return fs::exists("/run/netns/" + ns); }
bool LinkExists(const std::string& dev) { return fs::exists("/sys/class/net/" + dev); }

StatusOr<uint32_t> ChooseClusterSubnet(const std::string& pool_cidr,
                                       const std::string& clusters_dir) {
  auto pool = ParseIpv4Prefix(pool_cidr);
  if (!pool || pool->second > kSubnetBits) {
    return absl::InvalidArgumentError(absl::StrCat("node network ", pool_cidr,
                                                   " is not a CIDR of /", kSubnetBits,
                                                   " or larger"));
  }
  std::vector<Ipv4Prefix> taken;
  HF_ASSIGN_OR_RETURN(auto addrs, RunCapture({"ip", "-j", "-4", "addr", "show"}));
  HF_ASSIGN_OR_RETURN(auto routes,
                      RunCapture({"ip", "-j", "-4", "route", "show", "table", "all"}));
  auto a = nlohmann::json::parse(addrs.out, nullptr, false);
  if (a.is_array()) {
    for (const auto& link : a) {
      for (const auto& info : link.value("addr_info", nlohmann::json::array())) {
        auto p = ParseIpv4Prefix(
            absl::StrCat(info.value("local", ""), "/", info.value("prefixlen", 32)));
        if (p) taken.push_back(*p);
      }
    }
  }
  auto r = nlohmann::json::parse(routes.out, nullptr, false);
  if (r.is_array()) {
    for (const auto& route : r) {
      const std::string dst = route.value("dst", "default");
      if (dst == "default") continue;
      if (auto p = ParseIpv4Prefix(dst)) taken.push_back(*p);
    }
  }
  std::error_code ec;  // subnets of this data dir's other clusters
  for (const auto& entry : fs::directory_iterator(clusters_dir, ec)) {
    auto text = ReadFile(entry.path().string() + "/network.json");
    if (!text.ok()) continue;
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_object()) {
      if (auto p = ParseIpv4Prefix(j.value("subnet", ""))) taken.push_back(*p);
    }
  }
  if (auto base = FirstFreeSubnet(*pool, kSubnetBits, taken)) return *base;
  return absl::ResourceExhaustedError(
      absl::StrCat("no free /", kSubnetBits, " left in node network ", pool_cidr));
}

Status EnsureClusterBridge(const std::string& bridge, const std::string& host_ip) {
  if (!LinkExists(bridge)) {
    HF_RETURN_IF_ERROR(RunOk({"ip", "link", "add", bridge, "type", "bridge"}));
  }
  // A bridge without an address of its own takes its lowest port's: adding or removing a
  // node then changes the MAC behind the host address, every node's ARP entry goes stale
  // and heartbeats stop for 10-30 s, long enough to look hung. A fixed, locally
  // administered address (from the bridge's name) never changes.
  auto assign = ReadFile("/sys/class/net/" + bridge + "/addr_assign_type");
  if (!assign.ok() || absl::StripAsciiWhitespace(*assign) != "3") {
    const std::string h = Sha256Hex(bridge);
    const std::string mac = absl::StrCat("02:", h.substr(0, 2), ":", h.substr(2, 2), ":",
                                         h.substr(4, 2), ":", h.substr(6, 2), ":",
                                         h.substr(8, 2));
    HF_RETURN_IF_ERROR(RunOk({"ip", "link", "set", "dev", bridge, "address", mac}));
  }
  HF_ASSIGN_OR_RETURN(auto shown, RunCapture({"ip", "-4", "-o", "addr", "show", "dev", bridge}));
  if (shown.out.find(" " + host_ip + "/") == std::string::npos) {
    HF_RETURN_IF_ERROR(
        RunOk({"ip", "addr", "add", absl::StrCat(host_ip, "/", kSubnetBits), "dev", bridge}));
  }
  return RunOk({"ip", "link", "set", bridge, "up"});
}

Status SetUpNodeNetns(const std::string& ns, const std::string& veth, const std::string& bridge,
                      const std::string& ip, const std::vector<std::vector<std::string>>& routes) {
  if (NetnsExists(ns)) (void)RunCapture({"ip", "netns", "del", ns});  // stale from a crash
  if (LinkExists(veth)) (void)RunCapture({"ip", "link", "del", veth});
  HF_RETURN_IF_ERROR(RunOk({"ip", "netns", "add", ns}));
  HF_RETURN_IF_ERROR(
      RunOk({"ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns}));
  HF_RETURN_IF_ERROR(RunOk({"ip", "link", "set", veth, "master", bridge, "up"}));
  HF_RETURN_IF_ERROR(
      RunOk({"ip", "-n", ns, "addr", "add", absl::StrCat(ip, "/", kSubnetBits), "dev", "eth0"}));
  HF_RETURN_IF_ERROR(RunOk({"ip", "-n", ns, "link", "set", "eth0", "up"}));
  HF_RETURN_IF_ERROR(RunOk({"ip", "-n", ns, "link", "set", "lo", "up"}));
  for (const auto& route : routes) {
    std::vector<std::string> argv = {"ip", "-n", ns, "route", "add"};
    argv.insert(argv.end(), route.begin(), route.end());
    HF_RETURN_IF_ERROR(RunOk(argv));
  }
  return absl::OkStatus();
}

uint32_t PodRouteTable(uint32_t subnet_base) {
  return 0x48000000u + (subnet_base >> (32 - kSubnetBits));
}

StatusOr<std::vector<std::vector<std::string>>> PodRouteCommands(
    const std::vector<PodRoute>& present, const std::vector<PodRoute>& wanted,
    const std::string& bridge, uint32_t subnet_base) {
  const std::string proto = std::to_string(kPodRouteProtocol);
  const std::string table = std::to_string(PodRouteTable(subnet_base));
  std::vector<std::vector<std::string>> out;
  std::set<std::string> wanted_cidrs;
  for (const PodRoute& r : wanted) {
    const auto cidr = ParseIpv4Prefix(r.pod_cidr);
    const std::string route = absl::StrCat(r.pod_cidr, " via ", r.node_ip);
    if (!cidr || r.pod_cidr != absl::StrCat(Ipv4Text(cidr->first), "/", cidr->second)) {
      return absl::InvalidArgumentError(absl::StrCat("pod route ", route, ": no a.b.c.d/n"));
    }
    // Over the subnet it would take the nodes' own addresses off the bridge.
    if (PrefixesOverlap(cidr->first, cidr->second, subnet_base, kSubnetBits)) {
      return absl::InvalidArgumentError(
          absl::StrCat("pod route ", route, ": overlaps the cluster subnet"));
    }
    if (Status st = AddressPool(subnet_base).CheckNodeAddress(r.node_ip); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("pod route ", route, ": ", st.message()));
    }
    if (!wanted_cidrs.insert(r.pod_cidr).second) {
      return absl::InvalidArgumentError(absl::StrCat("pod range ", r.pod_cidr, " twice"));
    }
    if (std::find(present.begin(), present.end(), r) != present.end()) continue;
    out.push_back({"ip", "-4", "route", "replace", r.pod_cidr, "via", r.node_ip, "dev", bridge,
                   "table", table, "proto", proto});
  }
  for (const PodRoute& r : present) {
    if (wanted_cidrs.contains(r.pod_cidr)) continue;
    out.push_back({"ip", "-4", "route", "del", r.pod_cidr, "table", table, "proto", proto});
  }
  return out;
}

StatusOr<std::vector<PodRoute>> PodRoutesIn(uint32_t table) {
  HF_ASSIGN_OR_RETURN(auto shown, RunCapture({"ip", "-j", "-4", "route", "show", "table",
                                              std::to_string(table), "proto",
                                              std::to_string(kPodRouteProtocol)}));
  // A table without routes does not exist: ip fails, and that is "none".
  const auto routes = nlohmann::json::parse(shown.out, nullptr, false);
  std::vector<PodRoute> out;
  if (!shown.ok() && !routes.is_array()) return out;
  for (const auto& r : routes.is_array() ? routes : nlohmann::json::array()) {
    if (!r.is_object()) continue;
    out.push_back({r.value("dst", ""), r.value("gateway", "")});
  }
  return out;
}

namespace {

// The priorities of our rules for `bridge` now (`ip -j -4 rule show`); `table` 0: any.
StatusOr<std::vector<int>> PodRouteRules(const std::string& bridge, uint32_t table) {
  HF_ASSIGN_OR_RETURN(auto shown, RunCapture({"ip", "-j", "-4", "rule", "show"}));
  if (!shown.ok()) return absl::InternalError("ip rule show failed: " + shown.out);
  const auto rules = nlohmann::json::parse(shown.out, nullptr, false);
  std::vector<int> out;
  for (const auto& r : rules.is_array() ? rules : nlohmann::json::array()) {
    if (!r.is_object() || r.value("iif", "") != bridge) continue;
    const auto t = r.find("table");
    const std::string text = t == r.end() ? "" : t->is_string() ? t->get<std::string>()
                                                                : t->dump();
    if (table == 0 || text == std::to_string(table)) out.push_back(r.value("priority", 0));
  }
  return out;
}

}  // namespace

Status EnsurePodRouteRule(const std::string& bridge, uint32_t table) {
  HF_ASSIGN_OR_RETURN(auto rules, PodRouteRules(bridge, table));
  if (!rules.empty()) return absl::OkStatus();
  return RunOk({"ip", "-4", "rule", "add", "iif", bridge, "lookup", std::to_string(table),
                "priority", std::to_string(kPodRouteRulePriority)});
}

void RemovePodRouteRules(const std::string& bridge) {
  auto rules = PodRouteRules(bridge, 0);
  if (!rules.ok()) return;
  for (size_t i = 0; i < rules->size(); ++i) {
    (void)RunCapture({"ip", "-4", "rule", "del", "iif", bridge});
  }
}

StatusOr<EgressConfig> MakeEgressConfig(const LocalProvider::Options& options) {
  EgressConfig c;
  c.egress = options.node_egress;
  c.agent_port = options.agent_port;
  c.apt_proxy_port = options.apt_proxy_port;
  c.registry_port = options.registry_port;
  c.kubernetes_api_ports = options.kubernetes_api_ports;
  if (c.kubernetes_api_ports.first > c.kubernetes_api_ports.second) {
    return absl::InvalidArgumentError("kubernetes_api_ports: first after last");
  }
  c.region = options.region;
  HF_ASSIGN_OR_RETURN(c.proxies, ProxySettingsFrom(options.proxy_environment));
  for (const std::string& entry : options.node_egress_allow) {
    const auto prefix = ParseIpv4Prefix(entry);
    if (!prefix) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--node-egress-allow: '", entry, "' is not an IPv4 address or CIDR (a.b.c.d/n)"));
    }
    c.allow.push_back(absl::StrCat(Ipv4Text(prefix->first), "/", prefix->second));
  }
  if (!c.allow.empty() && c.egress != NodeEgress::kNat) {
    return absl::InvalidArgumentError("--node-egress-allow applies to --node-egress nat only");
  }
  if (c.egress != NodeEgress::kProxy) return c;
  if (!c.proxies.any()) {
    return absl::InvalidArgumentError(
        "--node-egress proxy needs http_proxy or https_proxy in the server's environment");
  }
  // Without a default route a node cannot ask DNS for a proxy's address: resolve it here.
  for (auto* p : {&c.proxies.http, &c.proxies.https}) {
    if (!*p || (*p)->OnHostLoopback()) continue;
    if (ParseIpv4((*p)->host)) continue;
    const std::string ip = ResolveIpv4((*p)->host);
    if (ip.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--node-egress proxy: the proxy host ", (*p)->host, " has no IPv4 address"));
    }
    spdlog::info("local provider: nodes reach proxy {} at {}", (*p)->host, ip);
    (*p)->host = ip;
  }
  return c;
}

ClusterNetworks::ClusterNetworks(EgressConfig config, std::string fleet_id, std::string root)
    : config_(std::move(config)), fleet_id_(std::move(fleet_id)), root_(std::move(root)) {}

FirewallSpec ClusterNetworks::Spec() const {
  FirewallSpec spec;
  spec.fleet_id = fleet_id_;
  spec.egress = config_.egress;
  spec.agent_port = config_.agent_port;
  spec.host_ports = HostProxyPorts(config_.proxies);
  if (config_.apt_proxy_port != 0) spec.host_ports.push_back(config_.apt_proxy_port);
  // The local registry: containerd in EKS nodes pulls from it (docs/kubernetes.md).
  if (config_.registry_port != 0) spec.host_ports.push_back(config_.registry_port);
  spec.local_ports_first = config_.kubernetes_api_ports.first;
  spec.local_ports_last = config_.kubernetes_api_ports.second;
  if (config_.egress == NodeEgress::kProxy) spec.remote_proxies = RemoteProxies(config_.proxies);
  spec.egress_allow = config_.allow;
  if (!spec.egress_allow.empty()) spec.resolvers = Nameservers(NodeResolvConf(nullptr));
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root_ + "/clusters", ec)) {
    auto text = ReadFile(entry.path().string() + "/network.json");
    if (!text.ok()) continue;
    const auto j = nlohmann::json::parse(*text, nullptr, false);
    if (!j.is_object()) continue;
    ClusterSubnet c{entry.path().filename().string(), j.value("bridge", ""),
                    j.value("subnet", ""), j.value("host_address", "")};
    if (!c.bridge.empty() && !c.subnet.empty() && !c.host_ip.empty()) {
      spec.clusters.push_back(std::move(c));
    }
  }
  return spec;
}

Status ClusterNetworks::Apply() {
  const FirewallSpec spec = Spec();
  const std::string script = root_ + "/firewall.nft";
  HF_RETURN_IF_ERROR(WriteFileAtomically(script, RenderFirewall(spec), 0600));
  HF_ASSIGN_OR_RETURN(auto r, RunCapture({"nft", "-f", script}));
  if (!r.ok()) {
    return absl::InternalError(absl::StrCat("nft -f ", script, " failed: ", r.out));
  }
  return SetForwarding(NeedsForwarding(spec));
}

Status ClusterNetworks::SetForwarding(bool needed) {
  HF_ASSIGN_OR_RETURN(HostNetworkLock lock, HostNetworkLock::Acquire());
  Status st;
  auto current = ReadFile(kIpForward);
  const bool on = current.ok() && absl::StripAsciiWhitespace(*current) == "1";
  if (needed && !on) {
    // The marker first: a crash in between leaves forwarding off, never on and forgotten.
    st = WriteFileAtomically(kForwardMarker, "Hyperfleet turned net.ipv4.ip_forward on\n", 0644);
    if (st.ok() && !WriteSysctl(kIpForward, "1\n")) {
      st = absl::InternalError("cannot turn IPv4 forwarding on (net.ipv4.ip_forward)");
    }
    if (st.ok()) spdlog::info("local provider: turned IPv4 forwarding on (--node-egress)");
  } else if (!needed && fs::exists(kForwardMarker) && !AnyHyperfleetBridge()) {
    if (on && !WriteSysctl(kIpForward, "0\n")) {
      spdlog::warn("local provider: cannot turn IPv4 forwarding back off");
    } else {
      unlink(kForwardMarker);
      if (on) spdlog::info("local provider: turned IPv4 forwarding back off (no cluster left)");
    }
  }
  return st;
}

std::vector<std::vector<std::string>> ClusterNetworks::NodeRoutes(
    const std::string& host_ip) const {
  return local::NodeRoutes(config_.egress, host_ip,
                           config_.egress == NodeEgress::kProxy ? RemoteProxies(config_.proxies)
                                                                : std::vector<TcpEndpoint>{});
}

std::string ClusterNetworks::NodeResolvConf(std::string* note) const {
  auto host = ReadFile("/etc/resolv.conf");
  auto upstream = ReadFile("/run/systemd/resolve/resolv.conf");
  std::string ignored;
  return ResolvConf(config_.egress, host.ok() ? *host : "", upstream.ok() ? *upstream : "",
                    note ? note : &ignored);
}

Status ClusterNetworks::WriteNodeFiles(const std::string& m, const NodeNetwork& net) {
  std::string note;
  const std::string resolv = NodeResolvConf(&note);
  if (!note.empty() && !resolv_note_logged_.exchange(true)) {
    spdlog::warn("local provider: {}", note);
  }
  HF_RETURN_IF_ERROR(PutNodeFile(m, m + "/etc/resolv.conf", resolv));
  const auto env = NodeProxyEnvironment(config_.proxies, net);
  const std::string environment = m + "/etc/environment";
  const std::string before = ReadNodeFile(environment);
  if (const std::string after = EditEtcEnvironment(before, env); after != before) {
    HF_RETURN_IF_ERROR(PutNodeFile(m, environment, after, /*remove=*/false));
  }
  HF_RETURN_IF_ERROR(PutNodeFile(m, m + "/etc/apt/apt.conf.d/00hyperfleet-proxy",
                                 AptProxyConf(env, config_.apt_proxy_port, net.host_ip)));
  const std::string pip = m + "/etc/pip.conf";
  std::error_code ec;
  const bool users = fs::exists(fs::symlink_status(pip, ec)) &&
                     !absl::StartsWith(ReadNodeFile(pip), kPipConfMarker);
  if (!users) HF_RETURN_IF_ERROR(PutNodeFile(m, pip, PipConf(env)));
  return absl::OkStatus();
}

std::string ClusterNetworks::AgentEnvLines(const NodeNetwork& net) const {
  std::string out;
  for (const auto& [k, v] : NodeProxyEnvironment(config_.proxies, net)) {
    absl::StrAppend(&out, k, "=", v, "\n");
  }
  return out;
}

}  // namespace hf::provider::local
