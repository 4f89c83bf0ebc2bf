// LocalProvider, per cluster (local_provider_impl.h): the subnet (chosen under a host-wide
// lock), the bridge, the munge key, the IMDS namespace and endpoint, the agent endpoint on
// the bridge's host address, and their removal with the cluster's last node.
#include <sys/stat.h>

#include <chrono>
#include <filesystem>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/ipv4.h"
#include "hyperfleet/common/random.h"
#include "hyperfleet/common/subprocess.h"
#include "provider/local/imds.h"
#include "provider/local/local_provider_impl.h"
#include "provider/local/sys.h"

namespace hf::provider {
namespace fs = std::filesystem;
using local::kSubnetBits;
using local::kSubnetSize;
using local::LinkExists;
using local::NetnsExists;
using local::RunOk;

StatusOr<LocalProvider::Impl::NetInfo> LocalProvider::Impl::ensureCluster(const std::string& cluster_id) {
  std::lock_guard lock(cluster_mu_);
  ClusterNet& c = clusters_[cluster_id];
  if (c.ready) return NetInfo{c.base, c.bridge, c.host_ip};
  c.dir = absl::StrCat(root_, "/clusters/", cluster_id);
  c.bridge = LocalNames::Bridge(fleet_id_, cluster_id);
  c.imds_ns = LocalNames::ImdsNetns(fleet_id_, cluster_id);
  c.imds_veth = LocalNames::ImdsVeth(fleet_id_, cluster_id);
  HF_RETURN_IF_ERROR(MakeDirs(c.dir + "/fsx"));
  chmod((c.dir + "/fsx").c_str(), 0755);
  // One munge key per cluster (HyperPod gives every node of a cluster the same key and
  // no other cluster that key): Slurm daemons of two clusters on this host cannot talk.
  if (!fs::exists(mungeKeyPath(cluster_id))) {
    HF_RETURN_IF_ERROR(
        WriteFileAtomically(mungeKeyPath(cluster_id), RandomHex(512), 0400));
  }
  const std::string network_file = c.dir + "/network.json";
  if (auto text = ReadFile(network_file); text.ok()) {
    auto j = nlohmann::json::parse(*text, nullptr, false);
    auto p = j.is_object() ? ParseIpv4Prefix(j.value("subnet", "")) : std::nullopt;
    if (!p) return absl::InternalError(absl::StrCat("malformed ", network_file));
    c.base = p->first;
    c.host_ip = Ipv4Text(c.base + 1);
    HF_RETURN_IF_ERROR(local::EnsureClusterBridge(c.bridge, c.host_ip));
  } else {
    // Host-wide lock: another server may be choosing a subnet at the same time.
    HF_ASSIGN_OR_RETURN(local::HostNetworkLock host_lock, local::HostNetworkLock::Acquire());
    auto base = local::ChooseClusterSubnet(options_.node_network, root_ + "/clusters");
    Status st = base.status();
    if (st.ok()) {
      c.base = *base;
      c.host_ip = Ipv4Text(c.base + 1);
      nlohmann::json j = {{"subnet", absl::StrCat(Ipv4Text(c.base), "/", kSubnetBits)},
                          {"bridge", c.bridge},
                          {"host_address", c.host_ip}};
      st = WriteFileAtomically(network_file, j.dump(2) + "\n");
      // Under the lock: the address now shows as taken.
      if (st.ok()) st = local::EnsureClusterBridge(c.bridge, c.host_ip);
    }
    HF_RETURN_IF_ERROR(st);
  }
  HF_RETURN_IF_ERROR(networks_.Apply());  // the cluster's isolation, before any node joins
  HF_RETURN_IF_ERROR(setUpImds(cluster_id, c));
  if (options_.agent_handler && !c.agent_server) {
    http::HttpServerOptions ho;
    ho.host = c.host_ip;
    ho.port = options_.agent_port;
    ho.io_threads = 1;
    // Agents send small requests and heartbeat every few seconds: a node that holds
    // connections open without using them is cut off sooner than an API client.
    ho.request_timeout = std::chrono::seconds(30);
    ho.io_timeout_seconds = 10;
    ho.max_body_bytes = 4u << 20;
    HF_ASSIGN_OR_RETURN(c.agent_server, http::HttpServer::Start(ho, options_.agent_handler));
  }
  c.ready = true;
  return NetInfo{c.base, c.bridge, c.host_ip};
}

// The IMDS namespace on the bridge holds 169.254.169.254 and the subnet's last address;
// its listening socket is made inside it and served by an in-process HttpServer.
Status LocalProvider::Impl::setUpImds(const std::string& cluster_id, ClusterNet& c) {
  if (c.imds_server) return absl::OkStatus();
  const std::string ns = c.imds_ns;
  // After a server restart the namespace is still there: keep it (and its veth's MAC
  // address, which running nodes have in their ARP caches) and only listen again.
  const bool reuse = NetnsExists(ns) && LinkExists(c.imds_veth);
  if (!reuse) {
    if (NetnsExists(ns)) (void)RunCapture({"ip", "netns", "del", ns});
    if (LinkExists(c.imds_veth)) (void)RunCapture({"ip", "link", "del", c.imds_veth});
    HF_RETURN_IF_ERROR(RunOk({"ip", "netns", "add", ns}));
    HF_RETURN_IF_ERROR(RunOk({"ip", "link", "add", c.imds_veth, "type", "veth", "peer", "name",
                              "eth0", "netns", ns}));
    HF_RETURN_IF_ERROR(RunOk({"ip", "-n", ns, "addr", "add", "169.254.169.254/32", "dev",
                              "eth0"}));
    HF_RETURN_IF_ERROR(RunOk({"ip", "-n", ns, "addr", "add",
                              absl::StrCat(Ipv4Text(c.base + kSubnetSize - 1), "/", kSubnetBits),
                              "dev", "eth0"}));
    HF_RETURN_IF_ERROR(RunOk({"ip", "-n", ns, "link", "set", "eth0", "up"}));
    HF_RETURN_IF_ERROR(RunOk({"ip", "-n", ns, "link", "set", "lo", "up"}));
  }
  HF_RETURN_IF_ERROR(RunOk({"ip", "link", "set", c.imds_veth, "master", c.bridge, "up"}));
  HF_ASSIGN_OR_RETURN(const int fd, local::ListenInNetns(ns, "169.254.169.254", 80));
  http::HttpServerOptions ho;
  ho.listen_fd = fd;
  ho.io_threads = 1;
  auto tokens = c.tokens;
  auto server = http::HttpServer::Start(
      ho, [this, cluster_id, tokens](http::HttpRequest&& req) {
        return local::ImdsResponse(
            req, *tokens,
            [&](std::string_view remote) { return imdsNode(cluster_id, remote); },
            options_.region, std::chrono::steady_clock::now());
      });
  close(fd);
  HF_RETURN_IF_ERROR(server.status());
  c.imds_server = std::move(*server);
  return absl::OkStatus();
}

// The node of `cluster_id` at `remote` for IMDS (the last record with that address).
std::optional<local::ImdsNode> LocalProvider::Impl::imdsNode(const std::string& cluster_id,
                                                             std::string_view remote) const {
  std::optional<local::ImdsNode> node;
  std::lock_guard lock(mu_);
  for (auto& [id, rec] : nodes_) {
    if (rec->spec.cluster_id == cluster_id && rec->ip == remote) {
      node = local::ImdsNode{rec->spec.instance_id, rec->spec.instance_type, rec->ip,
                             rec->hostname};
    }
  }
  return node;
}

// Under cluster_mu_, so that the bridge cannot go in between. The routes go with the bridge
// (the kernel drops a deleted device's routes); its rule goes in tearDownClusterIfEmpty.
Status LocalProvider::Impl::setPodRoutes(const std::string& cluster_id,
                                         const std::vector<PodRoute>& routes) {
  std::lock_guard lock(cluster_mu_);
  const std::string bridge = LocalNames::Bridge(fleet_id_, cluster_id);
  auto text = ReadFile(absl::StrCat(root_, "/clusters/", cluster_id, "/network.json"));
  const auto j = text.ok() ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
  const auto subnet = j.is_object() ? ParseIpv4Prefix(j.value("subnet", "")) : std::nullopt;
  if (!subnet || !LinkExists(bridge)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cluster ", cluster_id, " has no network on this host"));
  }
  const uint32_t table = local::PodRouteTable(subnet->first);
  HF_ASSIGN_OR_RETURN(auto present, local::PodRoutesIn(table));
  HF_ASSIGN_OR_RETURN(auto commands,
                      local::PodRouteCommands(present, routes, bridge, subnet->first));
  for (const auto& argv : commands) HF_RETURN_IF_ERROR(RunOk(argv));
  return local::EnsurePodRouteRule(bridge, table);
}

void LocalProvider::Impl::tearDownClusterIfEmpty(const std::string& cluster_id) {
  std::lock_guard lock(cluster_mu_);
  {
    std::lock_guard l(mu_);
    for (auto& [id, rec] : nodes_) {
      if (rec->spec.cluster_id == cluster_id) return;
    }
  }
  auto it = clusters_.find(cluster_id);
  if (it != clusters_.end()) {
    if (it->second.imds_server) it->second.imds_server->stop();
    if (it->second.agent_server) it->second.agent_server->stop();
    clusters_.erase(it);
  }
  const std::string ns = LocalNames::ImdsNetns(fleet_id_, cluster_id);
  if (NetnsExists(ns)) (void)RunCapture({"ip", "netns", "del", ns});
  const std::string veth = LocalNames::ImdsVeth(fleet_id_, cluster_id);
  if (LinkExists(veth)) (void)RunCapture({"ip", "link", "del", veth});
  const std::string bridge = LocalNames::Bridge(fleet_id_, cluster_id);
  if (LinkExists(bridge)) (void)RunCapture({"ip", "link", "del", bridge});
  local::RemovePodRouteRules(bridge);
  std::error_code ec;
  fs::remove_all(absl::StrCat(root_, "/clusters/", cluster_id), ec);
  if (Status st = networks_.Apply(); !st.ok()) {
    spdlog::warn("local provider: {}", std::string(st.message()));
  }
}

std::string LocalProvider::Impl::mungeKeyPath(const std::string& cluster_id) const {
  return absl::StrCat(root_, "/clusters/", cluster_id, "/munge.key");
}

}  // namespace hf::provider
