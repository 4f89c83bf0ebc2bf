#include "hyperfleet/provider/local_provider.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <list>
#include <set>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "hyperfleet/common/paths.h"
#include "provider/local/ami_facts.h"
#include "provider/local/cluster_network.h"
#include "provider/local/ipv4.h"
#include "provider/local/sys.h"

namespace hf::provider {
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using local::Ipv4Text;
using local::kSubnetBits;
using local::kSubnetSize;
using local::LinkExists;
using local::NetnsExists;
using local::ParseIpv4;
using local::ParseIpv4Prefix;
using local::PrefixesOverlap;
using local::Run;
using local::RunOk;

// ---- names -------------------------------------------------------------------------------

std::string LocalNames::Bridge(std::string_view fleet_id, std::string_view cluster_id) {
  return "hfb" + local::Sha256Hex(std::string(fleet_id) + std::string(cluster_id)).substr(0, 8);
}
std::string LocalNames::NodeVeth(std::string_view fleet_id, std::string_view instance_id) {
  return "hfv" + local::Sha256Hex(std::string(fleet_id) + std::string(instance_id)).substr(0, 10);
}
std::string LocalNames::NodeNetns(std::string_view fleet_id, std::string_view instance_id) {
  return "hf-" + std::string(fleet_id) + "-" + std::string(instance_id);
}
std::string LocalNames::ImdsNetns(std::string_view fleet_id, std::string_view cluster_id) {
  return "hf-" + std::string(fleet_id) + "-imds-" + std::string(cluster_id);
}
std::string LocalNames::ImdsVeth(std::string_view fleet_id, std::string_view cluster_id) {
  return "hfm" + local::Sha256Hex(std::string(fleet_id) + "imds" + std::string(cluster_id)).substr(0, 10);
}
std::string LocalNames::Hostname(std::string_view ipv4) {
  std::string out = "ip-" + std::string(ipv4);
  for (char& c : out) {
    if (c == '.') c = '-';
  }
  return out;
}

namespace {

// An IMDSv2 session token store (per cluster).
struct ImdsTokens {
  std::mutex mu;
  std::map<std::string, std::chrono::steady_clock::time_point> expiry;
};

// When process `pid` started (its /proc stat starttime after the host's btime); zero when
// unknown. A node's init starts anew at every boot, so this is the node's boot time.
SystemTime ProcessStartTime(int pid) {
  auto stat = local::ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  auto host = local::ReadFile("/proc/stat");
  if (!stat.ok() || !host.ok()) return SystemTime{};
  // Fields after the parenthesised command name; starttime is field 22 (1-based).
  const size_t close = stat->rfind(')');
  if (close == std::string::npos || close + 2 > stat->size()) return SystemTime{};
  std::vector<std::string> f = absl::StrSplit(stat->substr(close + 2), ' ');
  double start_ticks = 0;
  if (f.size() < 20 || !absl::SimpleAtod(f[19], &start_ticks)) return SystemTime{};
  double btime = 0;
  for (absl::string_view line : absl::StrSplit(*host, '\n')) {
    if (absl::ConsumePrefix(&line, "btime ") && absl::SimpleAtod(line, &btime)) break;
  }
  if (btime <= 0) return SystemTime{};
  return FromEpochSeconds(btime + start_ticks / static_cast<double>(sysconf(_SC_CLK_TCK)));
}

}  // namespace

// ---- implementation ----------------------------------------------------------------------

class LocalProvider::Impl {
 public:
  enum class Phase { kSettingUp, kStarted, kFailed, kTerminating };
  struct NodeRec {
    InstanceSpec spec;
    std::string ip;
    std::string hostname;
    Phase phase = Phase::kSettingUp;
    std::string message;
    std::shared_ptr<std::mutex> op_mu = std::make_shared<std::mutex>();
    std::atomic<bool> stop_now{false};  ///< terminate without a clean shutdown
  };
  struct ClusterNet {
    bool ready = false;
    uint32_t base = 0;
    std::string bridge, host_ip, imds_ns, imds_veth, dir;
    std::unique_ptr<http::HttpServer> imds_server, agent_server;
    std::shared_ptr<ImdsTokens> tokens = std::make_shared<ImdsTokens>();
  };

  Impl(const Options& options, std::string fleet_id, local::EgressConfig egress)
      : options_(options),
        fleet_id_(std::move(fleet_id)),
        root_(options_.data_dir + "/local"),
        networks_(std::move(egress), fleet_id_, root_) {
    hosts_thread_ = std::thread([this] { hostsLoop(); });
  }

  ~Impl() {
    std::list<Worker> workers;
    {
      std::lock_guard lock(mu_);
      shutting_down_ = true;
      workers.swap(workers_);
    }
    for (auto& w : workers) w.thread.join();
    {
      std::lock_guard lock(hosts_mu_);
      hosts_stop_ = true;
    }
    hosts_cv_.notify_all();
    hosts_thread_.join();
    std::lock_guard lock(cluster_mu_);
    for (auto& [id, c] : clusters_) {
      if (c.imds_server) c.imds_server->stop();
      if (c.agent_server) c.agent_server->stop();
    }
  }

  std::string nodeDir(std::string_view id) const { return root_ + "/nodes/" + std::string(id); }

  Status launch(const InstanceSpec& spec) {
    if (spec.instance_id.empty() || spec.cluster_id.empty() ||
        spec.instance_id.find('/') != std::string::npos ||
        spec.cluster_id.find('/') != std::string::npos) {
      return absl::InvalidArgumentError("instance and cluster ids must be non-empty names");
    }
    std::lock_guard lock(mu_);
    if (nodes_.count(spec.instance_id)) return absl::OkStatus();  // idempotent
    auto rec = std::make_shared<NodeRec>();
    rec->spec = spec;
    rec->ip = spec.private_ip;
    nodes_[spec.instance_id] = rec;
    spawnLocked([this, rec] { setUp(rec, /*reboot=*/false); });
    return absl::OkStatus();
  }

  Status terminate(std::string_view instance_id, bool now = false) {
    std::lock_guard lock(mu_);
    auto it = nodes_.find(std::string(instance_id));
    if (it == nodes_.end()) return absl::OkStatus();
    auto rec = it->second;
    if (now) rec->stop_now = true;  // also hurries a terminate already under way
    if (rec->phase == Phase::kTerminating) return absl::OkStatus();
    rec->phase = Phase::kTerminating;
    spawnLocked([this, rec] { tearDown(rec); });
    return absl::OkStatus();
  }

  std::vector<InstanceObservation> list(std::string_view cluster_id) {
    std::vector<std::shared_ptr<NodeRec>> recs;
    {
      std::lock_guard lock(mu_);
      for (auto& [id, rec] : nodes_) {
        if (rec->spec.cluster_id == cluster_id) recs.push_back(rec);
      }
    }
    std::vector<InstanceObservation> out;
    for (auto& rec : recs) {
      InstanceObservation o;
      Phase phase;
      {
        std::lock_guard lock(mu_);
        o.instance_id = rec->spec.instance_id;
        o.cluster_id = rec->spec.cluster_id;
        o.private_ip = rec->ip;
        o.hostname = rec->hostname;
        o.message = rec->message;
        phase = rec->phase;
      }
      switch (phase) {
        case Phase::kSettingUp: o.state = InstanceState::kPending; break;
        case Phase::kFailed: o.state = InstanceState::kFailed; break;
        case Phase::kTerminating: o.state = InstanceState::kTerminating; break;
        case Phase::kStarted:
          if (auto init = initPid(o.instance_id); init.ok()) {
            o.state = InstanceState::kRunning;
            o.boot_time = ProcessStartTime(*init);
          } else if (supervisorPid(o.instance_id)) {
            o.state = InstanceState::kPending;  // booting, or rebooting
          } else {
            o.state = InstanceState::kFailed;
            o.message = absl::StrCat("the node stopped (see ", nodeDir(o.instance_id),
                                     "/console.log)");
          }
          break;
      }
      out.push_back(std::move(o));
    }
    return out;
  }

  std::optional<int> supervisorPid(std::string_view id) const {
    const std::string dir = nodeDir(id);
    auto pid = local::ReadPidFile(dir + "/supervisor.pid");
    if (pid && local::ProcessMatches(*pid, {"node-supervisor", dir})) return pid;
    return std::nullopt;
  }

  StatusOr<int> initPid(std::string_view id) const {
    auto sup = supervisorPid(id);
    if (!sup) return absl::NotFoundError("node " + std::string(id) + " is not running");
    for (int nspawn : local::ChildPids(*sup)) {
      for (int init : local::ChildPids(nspawn)) {
        auto comm = local::ReadFile(absl::StrCat("/proc/", init, "/comm"));
        if (comm.ok() && absl::StripAsciiWhitespace(*comm) == "systemd") return init;
      }
    }
    return absl::NotFoundError("node " + std::string(id) + " has no running systemd");
  }

  // Scans nodes/*/node.json of an earlier run (docs/nodes.md "A node's life" step 5).
  void adopt() {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(root_ + "/nodes", ec)) {
      auto text = local::ReadFile(entry.path().string() + "/node.json");
      if (!text.ok()) continue;
      const auto j = nlohmann::json::parse(*text, nullptr, false);
      if (!j.is_object()) continue;
      auto rec = std::make_shared<NodeRec>();
      rec->spec.instance_id = j.value("instance_id", "");
      rec->spec.cluster_id = j.value("cluster_id", "");
      rec->spec.cluster_name = j.value("cluster_name", "");
      rec->spec.group = j.value("group", "");
      rec->spec.instance_type = j.value("instance_type", "");
      if (j.contains("lifecycle")) rec->spec.lifecycle = j["lifecycle"];
      rec->spec.secondary_ebs_volume = j.value("secondary_ebs_volume", false);
      rec->ip = j.value("private_ip", "");
      rec->hostname = j.value("hostname", "");
      if (rec->spec.instance_id != entry.path().filename().string()) continue;
      std::lock_guard lock(mu_);
      nodes_[rec->spec.instance_id] = rec;
      if (j.value("terminating", false)) {
        rec->phase = Phase::kTerminating;
        spawnLocked([this, rec] { tearDown(rec); });
      } else if (supervisorPid(rec->spec.instance_id)) {
        rec->phase = Phase::kStarted;  // still running: untouched
        spawnLocked([this, rec] {
          auto net = ensureCluster(rec->spec.cluster_id);
          if (!net.ok()) spdlog::warn("local provider: cluster {}: {}", rec->spec.cluster_id,
                                      std::string(net.status().message()));
        });
      } else {
        // The supervisor is gone (host restart, or it was killed): whatever is left of the
        // node (an orphaned nspawn and its init) is stopped, then it boots again on the same
        // disk, as after a reboot.
        spawnLocked([this, rec] { bootAgain(rec); });
      }
    }
    // Clusters left without nodes (e.g. the server died while deleting one): remove their
    // bridge, IMDS namespace and directory.
    std::set<std::string> with_nodes;
    {
      std::lock_guard lock(mu_);
      for (auto& [id, rec] : nodes_) with_nodes.insert(rec->spec.cluster_id);
    }
    for (const auto& entry : fs::directory_iterator(root_ + "/clusters", ec)) {
      const std::string cluster_id = entry.path().filename().string();
      if (!with_nodes.count(cluster_id)) tearDownClusterIfEmpty(cluster_id);
    }
    // The fleet's rules as this run's flags say, before any node is set up again.
    std::lock_guard lock(cluster_mu_);
    if (Status st = networks_.Apply(); !st.ok()) {
      spdlog::warn("local provider: {}", std::string(st.message()));
    }
  }

  Status powerCycle(std::string_view instance_id) {
    std::lock_guard lock(mu_);
    auto it = nodes_.find(std::string(instance_id));
    if (it == nodes_.end()) {
      return absl::NotFoundError(absl::StrCat("no node ", std::string(instance_id)));
    }
    auto rec = it->second;
    if (rec->phase == Phase::kTerminating || rec->phase == Phase::kSettingUp) {
      return absl::FailedPreconditionError(
          absl::StrCat("node ", std::string(instance_id), " is not started"));
    }
    rec->phase = Phase::kSettingUp;
    spawnLocked([this, rec] { bootAgain(rec); });
    return absl::OkStatus();
  }

 private:
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  struct NetInfo {
    uint32_t base;
    std::string bridge, host_ip;
  };

  void spawnLocked(std::function<void()> fn) {
    for (auto it = workers_.begin(); it != workers_.end();) {  // reap finished workers
      if (it->done->load()) {
        it->thread.join();
        it = workers_.erase(it);
      } else {
        ++it;
      }
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    workers_.push_back(Worker{std::thread([fn = std::move(fn), done] {
                                fn();
                                done->store(true);
                              }),
                              done});
  }

  // ---- per cluster ----

  StatusOr<NetInfo> ensureCluster(const std::string& cluster_id) {
    std::lock_guard lock(cluster_mu_);
    ClusterNet& c = clusters_[cluster_id];
    if (c.ready) return NetInfo{c.base, c.bridge, c.host_ip};
    c.dir = absl::StrCat(root_, "/clusters/", cluster_id);
    c.bridge = LocalNames::Bridge(fleet_id_, cluster_id);
    c.imds_ns = LocalNames::ImdsNetns(fleet_id_, cluster_id);
    c.imds_veth = LocalNames::ImdsVeth(fleet_id_, cluster_id);
    HF_RETURN_IF_ERROR(EnsureDirectory(c.dir + "/fsx"));
    chmod((c.dir + "/fsx").c_str(), 0755);
    // One munge key per cluster (HyperPod gives every node of a cluster the same key and
    // no other cluster that key): Slurm daemons of two clusters on this host cannot talk.
    if (!fs::exists(mungeKeyPath(cluster_id))) {
      HF_RETURN_IF_ERROR(
          local::WriteFileAtomic(mungeKeyPath(cluster_id), local::RandomHex(512), 0400));
    }
    const std::string network_file = c.dir + "/network.json";
    if (auto text = local::ReadFile(network_file); text.ok()) {
      auto j = nlohmann::json::parse(*text, nullptr, false);
      auto p = j.is_object() ? ParseIpv4Prefix(j.value("subnet", "")) : std::nullopt;
      if (!p) return absl::InternalError(absl::StrCat("malformed ", network_file));
      c.base = p->first;
      c.host_ip = Ipv4Text(c.base + 1);
      HF_RETURN_IF_ERROR(local::EnsureClusterBridge(c.bridge, c.host_ip));
    } else {
      // Host-wide lock: another server may be choosing a subnet at the same time.
      HF_RETURN_IF_ERROR(EnsureDirectory("/run/hyperfleet"));
      const int lock_fd = open("/run/hyperfleet/network.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
      if (lock_fd < 0) return absl::InternalError("cannot open /run/hyperfleet/network.lock");
      flock(lock_fd, LOCK_EX);
      auto base = local::ChooseClusterSubnet(options_.node_network, root_ + "/clusters");
      Status st = base.status();
      if (st.ok()) {
        c.base = *base;
        c.host_ip = Ipv4Text(c.base + 1);
        nlohmann::json j = {{"subnet", absl::StrCat(Ipv4Text(c.base), "/", kSubnetBits)},
                            {"bridge", c.bridge},
                            {"host_address", c.host_ip}};
        st = local::WriteFileAtomic(network_file, j.dump(2) + "\n");
        // Under the lock: the address now shows as taken.
        if (st.ok()) st = local::EnsureClusterBridge(c.bridge, c.host_ip);
      }
      flock(lock_fd, LOCK_UN);
      close(lock_fd);
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
      ho.idle_timeout_seconds = 30;
      ho.io_timeout_seconds = 10;
      ho.max_body_bytes = 4u << 20;
      HF_ASSIGN_OR_RETURN(c.agent_server, http::HttpServer::Start(ho, options_.agent_handler));
    }
    c.ready = true;
    return NetInfo{c.base, c.bridge, c.host_ip};
  }

  // The IMDS namespace on the bridge holds 169.254.169.254 and the subnet's last address;
  // its listening socket is made inside it and served by an in-process HttpServer.
  Status setUpImds(const std::string& cluster_id, ClusterNet& c) {
    if (c.imds_server) return absl::OkStatus();
    const std::string ns = c.imds_ns;
    // After a server restart the namespace is still there: keep it (and its veth's MAC
    // address, which running nodes have in their ARP caches) and only listen again.
    const bool reuse = NetnsExists(ns) && LinkExists(c.imds_veth);
    if (!reuse) {
      if (NetnsExists(ns)) (void)Run({"ip", "netns", "del", ns});
      if (LinkExists(c.imds_veth)) (void)Run({"ip", "link", "del", c.imds_veth});
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
    int fd = -1;
    std::string error;
    std::thread([&] {  // setns() changes only this thread's network namespace
      const int nsfd = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
      if (nsfd < 0 || setns(nsfd, CLONE_NEWNET) != 0) {
        error = absl::StrCat("cannot enter ", ns, ": ", std::strerror(errno));
        if (nsfd >= 0) close(nsfd);
        return;
      }
      close(nsfd);
      fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      const int one = 1;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_port = htons(80);
      sa.sin_addr.s_addr = htonl(*ParseIpv4("169.254.169.254"));
      if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || listen(fd, 128) != 0) {
        error = absl::StrCat("cannot listen on 169.254.169.254:80 in ", ns, ": ",
                             std::strerror(errno));
        close(fd);
        fd = -1;
      }
    }).join();
    if (fd < 0) return absl::InternalError(error);
    http::HttpServerOptions ho;
    ho.listen_fd = fd;
    ho.io_threads = 1;
    auto tokens = c.tokens;
    auto server = http::HttpServer::Start(
        ho, [this, cluster_id, tokens](http::HttpRequest&& req) {
          return imds(cluster_id, *tokens, req);
        });
    close(fd);
    HF_RETURN_IF_ERROR(server.status());
    c.imds_server = std::move(*server);
    return absl::OkStatus();
  }

  http::HttpResponse imds(const std::string& cluster_id, ImdsTokens& tokens,
                          const http::HttpRequest& req) {
    auto text = [](int status, std::string body) {
      http::HttpResponse r;
      r.status = status;
      r.headers.emplace_back("Content-Type", "text/plain");
      r.body = std::move(body);
      return r;
    };
    const auto now = std::chrono::steady_clock::now();
    const std::string path(req.path());
    if (path == "/latest/api/token") {
      if (req.method != "PUT") return text(405, "");
      int ttl = 0;
      auto header = req.header("X-aws-ec2-metadata-token-ttl-seconds");
      if (!header || !absl::SimpleAtoi(std::string(*header), &ttl) || ttl < 1 || ttl > 21600) {
        return text(400, "");
      }
      std::string token = local::RandomHex(24);
      {
        std::lock_guard lock(tokens.mu);
        for (auto it = tokens.expiry.begin(); it != tokens.expiry.end();) {
          it = it->second < now ? tokens.expiry.erase(it) : std::next(it);
        }
        tokens.expiry[token] = now + std::chrono::seconds(ttl);
      }
      auto r = text(200, token);
      r.headers.emplace_back("X-aws-ec2-metadata-token-ttl-seconds", std::to_string(ttl));
      return r;
    }
    if (req.method != "GET" && req.method != "HEAD") return text(405, "");
    {
      auto token = req.header("X-aws-ec2-metadata-token");
      std::lock_guard lock(tokens.mu);
      auto it = token ? tokens.expiry.find(std::string(*token)) : tokens.expiry.end();
      if (it == tokens.expiry.end() || it->second < now) return text(401, "");
    }
    std::shared_ptr<NodeRec> node;
    {
      std::lock_guard lock(mu_);
      for (auto& [id, rec] : nodes_) {
        if (rec->spec.cluster_id == cluster_id && rec->ip == req.remote_address) node = rec;
      }
    }
    if (!node) return text(404, "");
    std::string type = node->spec.instance_type;
    if (type.rfind("ml.", 0) == 0) type = type.substr(3);
    const std::string fqdn = absl::StrCat(node->hostname, ".", options_.region,
                                          ".compute.internal");
    const std::map<std::string, std::string> values = {
        {"instance-id", node->spec.instance_id},
        {"instance-type", type},
        {"local-ipv4", node->ip},
        {"hostname", fqdn},
        {"local-hostname", fqdn},
        {"placement/availability-zone", options_.region + "a"},
        {"placement/region", options_.region}};
    const std::string prefix = "/latest/meta-data/";
    if (path == "/latest/meta-data" || path == prefix) {
      return text(200, "hostname\ninstance-id\ninstance-type\nlocal-hostname\nlocal-ipv4\nplacement/");
    }
    if (path == prefix + "placement" || path == prefix + "placement/") {
      return text(200, "availability-zone\nregion");
    }
    if (path.rfind(prefix, 0) == 0) {
      auto it = values.find(path.substr(prefix.size()));
      if (it != values.end()) return text(200, it->second);
    }
    return text(404, "");
  }

  void tearDownClusterIfEmpty(const std::string& cluster_id) {
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
    if (NetnsExists(ns)) (void)Run({"ip", "netns", "del", ns});
    const std::string veth = LocalNames::ImdsVeth(fleet_id_, cluster_id);
    if (LinkExists(veth)) (void)Run({"ip", "link", "del", veth});
    const std::string bridge = LocalNames::Bridge(fleet_id_, cluster_id);
    if (LinkExists(bridge)) (void)Run({"ip", "link", "del", bridge});
    std::error_code ec;
    fs::remove_all(absl::StrCat(root_, "/clusters/", cluster_id), ec);
    if (Status st = networks_.Apply(); !st.ok()) {
      spdlog::warn("local provider: {}", std::string(st.message()));
    }
  }

  // ---- per node ----

  // The node supervisor's bind mounts: storage volumes and, on a host with NVIDIA's driver,
  // its modules (ami_facts.h).
  std::vector<local::NodeBind> nodeBinds(const NodeRec& rec) const {
    std::optional<InstanceCaps> caps;
    if (options_.instance_caps) caps = options_.instance_caps(rec.spec.instance_type);
    return local::NodeBinds(
        local::StorageOf(caps ? caps->nvme_gb : 0, rec.spec.secondary_ebs_volume),
        local::HostDriverFacts(), nodeDir(rec.spec.instance_id), local::HostKernelRelease());
  }

  Status writeNodeJson(const NodeRec& rec, bool terminating) {
    const std::string dir = nodeDir(rec.spec.instance_id);
    InstanceCaps caps;
    if (options_.instance_caps) {
      if (auto c = options_.instance_caps(rec.spec.instance_type)) caps = *c;
    }
    nlohmann::json j = {
        {"instance_id", rec.spec.instance_id},
        {"cluster_id", rec.spec.cluster_id},
        {"cluster_name", rec.spec.cluster_name},
        {"group", rec.spec.group},
        {"instance_type", rec.spec.instance_type},
        {"lifecycle", rec.spec.lifecycle},
        {"secondary_ebs_volume", rec.spec.secondary_ebs_volume},
        {"binds", local::BindsToJson(nodeBinds(rec))},
        {"private_ip", rec.ip},
        {"hostname", rec.hostname},
        {"fleet_id", fleet_id_},
        {"netns", LocalNames::NodeNetns(fleet_id_, rec.spec.instance_id)},
        {"veth", LocalNames::NodeVeth(fleet_id_, rec.spec.instance_id)},
        {"merged", dir + "/merged"},
        {"fsx", absl::StrCat(root_, "/clusters/", rec.spec.cluster_id, "/fsx")},
        {"binary", options_.hyperfleet_binary},
        {"spank_plugin", spankPlugin()},
        {"vcpus", caps.vcpus},
        {"memory_gib", caps.memory_gib},
        {"stop_timeout_seconds", options_.stop_timeout_seconds},
        {"terminating", terminating}};
    return local::WriteFileAtomic(dir + "/node.json", j.dump(2) + "\n");
  }

  Status allocateIp(NodeRec& rec, const NetInfo& net) {
    std::lock_guard lock(mu_);
    if (!rec.ip.empty()) {
      auto ip = ParseIpv4(rec.ip);
      if (!ip || !PrefixesOverlap(*ip, 32, net.base, kSubnetBits) || *ip <= net.base + 1 ||
          *ip >= net.base + kSubnetSize - 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "requested address ", rec.ip, " is not a node address of ", Ipv4Text(net.base), "/22"));
      }
    } else {
      std::set<std::string> used;
      for (auto& [id, other] : nodes_) {
        if (other->spec.cluster_id == rec.spec.cluster_id) used.insert(other->ip);
      }
      for (uint32_t i = 2; i < kSubnetSize - 1; ++i) {
        if (!used.count(Ipv4Text(net.base + i))) {
          rec.ip = Ipv4Text(net.base + i);
          break;
        }
      }
      if (rec.ip.empty()) {
        return absl::ResourceExhaustedError("no free address left in the cluster's subnet");
      }
    }
    rec.hostname = LocalNames::Hostname(rec.ip);
    return absl::OkStatus();
  }

  Status setUpNetns(const NodeRec& rec, const NetInfo& net) {
    return local::SetUpNodeNetns(LocalNames::NodeNetns(fleet_id_, rec.spec.instance_id),
                                 LocalNames::NodeVeth(fleet_id_, rec.spec.instance_id),
                                 net.bridge, rec.ip, networks_.NodeRoutes(net.host_ip));
  }

  Status mountOverlay(const std::string& dir) {
    if (!fs::is_directory(options_.image_rootfs + "/etc")) {
      return absl::FailedPreconditionError(
          absl::StrCat("node image missing: ", options_.image_rootfs, " is not a root filesystem"));
    }
    for (const char* sub : {"/upper", "/work", "/merged"}) {
      HF_RETURN_IF_ERROR(EnsureDirectory(dir + sub));
    }
    chmod((dir + "/merged").c_str(), 0755);
    chmod((dir + "/upper").c_str(), 0755);
    if (local::IsMountPoint(dir + "/merged")) return absl::OkStatus();
    const std::string data = absl::StrCat("lowerdir=", options_.image_rootfs, ",upperdir=", dir,
                                          "/upper,workdir=", dir, "/work");
    if (mount("overlay", (dir + "/merged").c_str(), "overlay", 0, data.c_str()) != 0) {
      return absl::InternalError(absl::StrCat("cannot mount the overlay root at ", dir,
                                              "/merged: ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }

  std::string hostsFile(const std::string& cluster_id) {
    std::map<uint32_t, std::string> lines;
    {
      std::lock_guard lock(mu_);
      for (auto& [id, rec] : nodes_) {
        if (rec->spec.cluster_id != cluster_id || rec->ip.empty() ||
            rec->phase == Phase::kTerminating) {
          continue;
        }
        lines[ParseIpv4(rec->ip).value_or(0)] =
            absl::StrCat(rec->ip, " ", rec->hostname, ".", options_.region,
                         ".compute.internal ", rec->hostname, "\n");
      }
    }
    std::string out = "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n";
    for (auto& [k, line] : lines) out += line;
    return out;
  }

  // Asks for a rewrite of /etc/hosts in the cluster's nodes. Rewrites are coalesced: a
  // burst of launches (100 nodes at once) costs a few passes over the cluster, not one per
  // launch. A new node's own /etc/hosts is written before it boots (writeIdentity).
  void scheduleHostsRewrite(const std::string& cluster_id) {
    {
      std::lock_guard lock(hosts_mu_);
      hosts_dirty_.insert(cluster_id);
    }
    hosts_cv_.notify_all();
  }

  void hostsLoop() {
    std::unique_lock lock(hosts_mu_);
    while (!hosts_stop_) {
      hosts_cv_.wait(lock, [&] { return hosts_stop_ || !hosts_dirty_.empty(); });
      if (hosts_stop_) break;
      // Let the burst settle a little before writing.
      hosts_cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return hosts_stop_; });
      std::set<std::string> dirty;
      dirty.swap(hosts_dirty_);
      lock.unlock();
      for (const auto& id : dirty) rewriteHosts(id);
      lock.lock();
    }
  }

  // Rewrites /etc/hosts in every node of the cluster whose root is mounted.
  void rewriteHosts(const std::string& cluster_id) {
    const std::string hosts = hostsFile(cluster_id);
    std::vector<std::string> ids;
    {
      std::lock_guard lock(mu_);
      for (auto& [id, rec] : nodes_) {
        if (rec->spec.cluster_id == cluster_id && rec->phase != Phase::kTerminating) {
          ids.push_back(id);
        }
      }
    }
    for (const auto& id : ids) {
      const std::string merged = nodeDir(id) + "/merged";
      if (local::IsMountPoint(merged)) (void)local::WriteFileAtomic(merged + "/etc/hosts", hosts);
    }
  }

  std::string mungeKeyPath(const std::string& cluster_id) const {
    return absl::StrCat(root_, "/clusters/", cluster_id, "/munge.key");
  }

  // Installs the cluster's munge key as the node's /etc/munge/munge.key, owned by the node
  // image's munge user (munged refuses a key others can read or that it does not own).
  Status writeMungeKey(const std::string& merged, const std::string& cluster_id) {
    HF_ASSIGN_OR_RETURN(auto key, local::ReadFile(mungeKeyPath(cluster_id)));
    auto passwd = local::ReadFile(merged + "/etc/passwd");
    if (!passwd.ok()) return passwd.status();
    std::optional<std::pair<uid_t, gid_t>> owner;
    for (absl::string_view line : absl::StrSplit(*passwd, '\n')) {
      std::vector<std::string> f = absl::StrSplit(line, ':');
      uint32_t uid = 0, gid = 0;
      if (f.size() >= 4 && f[0] == "munge" && absl::SimpleAtoi(f[2], &uid) &&
          absl::SimpleAtoi(f[3], &gid)) {
        owner = std::make_pair(uid, gid);
      }
    }
    if (!owner) return absl::OkStatus();  // an image without munge has no Slurm either
    const std::string dir = merged + "/etc/munge";
    HF_RETURN_IF_ERROR(EnsureDirectory(dir));
    const std::string path = dir + "/munge.key";
    HF_RETURN_IF_ERROR(local::WriteFileAtomic(path, key, 0400));
    if (chown(path.c_str(), owner->first, owner->second) != 0) {
      return absl::InternalError(absl::StrCat("cannot chown ", path, ": ", strerror(errno)));
    }
    return absl::OkStatus();
  }

  Status writeIdentity(const NodeRec& rec, const NetInfo& net, bool reboot) {
    const std::string m = nodeDir(rec.spec.instance_id) + "/merged";
    // 0755 as on HyperPod's AMI, whatever the server's umask (daemons read below them).
    for (const char* d : {"/etc/hyperfleet", "/opt/ml/config", "/opt/sagemaker_cluster", "/fsx",
                          "/opt/hyperfleet/bin"}) {
      HF_RETURN_IF_ERROR(EnsureDirectory(m + d, 0755));
    }
    HF_RETURN_IF_ERROR(local::WriteNodeAmiFacts(m, local::HostDriverFacts(),
                                                local::HostKernelRelease(), nodeBinds(rec)));
    HF_RETURN_IF_ERROR(local::WriteFileAtomic(m + "/etc/hostname", rec.hostname + "\n"));
    HF_RETURN_IF_ERROR(local::WriteFileAtomic(m + "/etc/hosts", hostsFile(rec.spec.cluster_id)));
    const local::NodeNetwork node_net{
        net.host_ip, absl::StrCat(Ipv4Text(net.base), "/", kSubnetBits), options_.region};
    HF_RETURN_IF_ERROR(networks_.WriteNodeFiles(m, node_net));
    auto machine_id = local::ReadFile(m + "/etc/machine-id");
    if (!reboot || !machine_id.ok() || machine_id->size() < 32) {
      HF_RETURN_IF_ERROR(local::WriteFileAtomic(m + "/etc/machine-id", local::RandomHex(16) + "\n",
                                                0444));
    }
    HF_RETURN_IF_ERROR(writeMungeKey(m, rec.spec.cluster_id));
    const std::string token =
        options_.agent_token ? options_.agent_token(rec.spec.instance_id) : std::string();
    HF_RETURN_IF_ERROR(local::WriteFileAtomic(
        m + "/etc/hyperfleet/agent.env",
        absl::StrCat("HF_AGENT_URL=http://", net.host_ip, ":", options_.agent_port,
                     "\nHF_INSTANCE_ID=", rec.spec.instance_id, "\nHF_AGENT_TOKEN=", token, "\n",
                     networks_.AgentEnvLines(node_net)),
        0600));
    if (!fs::exists(m + "/opt/hyperfleet/bin/hyperfleet")) {
      HF_RETURN_IF_ERROR(local::WriteFileAtomic(m + "/opt/hyperfleet/bin/hyperfleet", "", 0755));
    }
    return writeAutoResumePlugin(m);
  }

  // The srun --auto-resume SPANK plugin built next to the hyperfleet binary
  // (src/slurm/spank/), or "" when this build has none (no Slurm headers).
  std::string spankPlugin() const {
    const fs::path p =
        fs::path(options_.hyperfleet_binary).parent_path() / "hyperfleet_auto_resume.so";
    std::error_code ec;
    return fs::is_regular_file(p, ec) ? p.string() : std::string();
  }

  // Registers the auto-resume plugin with the node's Slurm (an `optional` plugstack line: a
  // Slurm that cannot load it runs on without --auto-resume). The node supervisor
  // bind-mounts the host's plugin read-only at kAutoResumePluginPath, so a new build reaches
  // nodes at their next boot without rebuilding the image. Nodes without Slurm's
  // plugstack.conf.d, or whose /opt/slurm would lead out of the node's tree, are left alone.
  Status writeAutoResumePlugin(const std::string& m) {
    const std::string conf_dir = m + "/opt/slurm/etc/plugstack.conf.d";
    std::error_code ec;
    const fs::path real = fs::weakly_canonical(conf_dir, ec);
    const fs::path root = fs::weakly_canonical(m, ec);
    if (ec || !fs::is_directory(real, ec) ||
        !absl::StartsWith(real.string(), root.string() + "/")) {
      return absl::OkStatus();
    }
    const std::string conf = real.string() + "/hyperfleet-auto-resume.conf";
    if (spankPlugin().empty()) {
      fs::remove(conf, ec);
      return absl::OkStatus();
    }
    HF_RETURN_IF_ERROR(EnsureDirectory(m + "/opt/hyperfleet/lib", 0755));  // users' srun loads it
    if (!fs::exists(m + kAutoResumePluginPath)) {
      HF_RETURN_IF_ERROR(local::WriteFileAtomic(m + kAutoResumePluginPath, "", 0644));
    }
    return local::WriteFileAtomic(
        conf, absl::StrCat("# srun --auto-resume=1 (docs/slurm.md \"Auto-resume\"), written by "
                           "Hyperfleet's local provider at every boot.\n"
                           "optional ", kAutoResumePluginPath,
                           " supervisor=/opt/hyperfleet/bin/hyperfleet window=20\n"));
  }

  // Starts `<supervisor> <node-dir>` detached (double fork + setsid), output to console.log.
  Status startSupervisor(const std::string& dir) {
    unlink((dir + "/supervisor.pid").c_str());
    std::vector<std::string> argv = options_.supervisor_command;
    if (argv.empty()) argv = {options_.hyperfleet_binary, "node-supervisor"};
    argv.push_back(dir);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    const std::string console = dir + "/console.log";
    const pid_t pid = fork();
    if (pid < 0) return absl::InternalError("fork failed");
    if (pid == 0) {
      if (fork() == 0) {
        setsid();
        if (chdir("/") != 0) _exit(126);
        const int in = open("/dev/null", O_RDONLY);
        const int out = open(console.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
        dup2(in, 0);
        dup2(out, 1);
        dup2(out, 2);
        close_range(3, ~0u, 0);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
        execv(args[0], args.data());
        _exit(127);
      }
      _exit(0);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    const std::string id = fs::path(dir).filename().string();
    if (!local::WaitFor([&] { return supervisorPid(id).has_value(); }, 10s)) {
      return absl::InternalError(
          absl::StrCat("the node supervisor did not start (see ", console, ")"));
    }
    return absl::OkStatus();
  }

  // Stops whatever is left of a node (supervisor, an orphaned nspawn and its init) without
  // asking it, then boots it again on the same disk, as after a reboot.
  void bootAgain(std::shared_ptr<NodeRec> rec) {
    const std::string id = rec->spec.instance_id;
    {
      std::lock_guard op(*rec->op_mu);
      if (auto sup = supervisorPid(id)) kill(*sup, SIGKILL);
      (void)local::KillCgroupTree(absl::StrCat("hyperfleet/", fleet_id_, "/", id), 10s);
      if (auto nspawn = local::ReadPidFile(nodeDir(id) + "/nspawn.pid");
          nspawn && local::ProcessMatches(*nspawn, {"systemd-nspawn", nodeDir(id)})) {
        kill(*nspawn, SIGKILL);
        (void)local::WaitFor([&] { return !local::ProcessMatches(*nspawn, {"systemd-nspawn"}); },
                             5s);
      }
      const std::string merged = nodeDir(id) + "/merged";
      if (local::IsMountPoint(merged)) umount2(merged.c_str(), MNT_DETACH);
    }
    setUp(rec, /*reboot=*/true);
  }

  void setUp(std::shared_ptr<NodeRec> rec, bool reboot) {
    std::lock_guard op(*rec->op_mu);
    {
      std::lock_guard lock(mu_);
      if (rec->phase == Phase::kTerminating || shutting_down_) return;
    }
    Status st = [&]() -> Status {
      HF_ASSIGN_OR_RETURN(NetInfo net, ensureCluster(rec->spec.cluster_id));
      HF_RETURN_IF_ERROR(allocateIp(*rec, net));
      const std::string dir = nodeDir(rec->spec.instance_id);
      HF_RETURN_IF_ERROR(EnsureDirectory(dir));
      HF_RETURN_IF_ERROR(writeNodeJson(*rec, false));
      HF_RETURN_IF_ERROR(setUpNetns(*rec, net));
      HF_RETURN_IF_ERROR(mountOverlay(dir));
      HF_RETURN_IF_ERROR(writeIdentity(*rec, net, reboot));
      scheduleHostsRewrite(rec->spec.cluster_id);
      return startSupervisor(dir);
    }();
    std::lock_guard lock(mu_);
    if (rec->phase == Phase::kTerminating) return;
    if (st.ok()) {
      rec->phase = Phase::kStarted;
    } else {
      rec->phase = Phase::kFailed;
      rec->message = std::string(st.message());
      spdlog::warn("local provider: launch of {} failed: {}", rec->spec.instance_id, rec->message);
    }
  }

  void tearDown(std::shared_ptr<NodeRec> rec) {
    std::lock_guard op(*rec->op_mu);  // after any launch work of this node
    const std::string id = rec->spec.instance_id;
    const std::string dir = nodeDir(id);
    if (fs::exists(dir + "/node.json")) (void)writeNodeJson(*rec, true);
    const auto stop_budget = std::chrono::seconds(options_.stop_timeout_seconds + 15);
    if (auto sup = supervisorPid(id)) {
      kill(*sup, rec->stop_now ? SIGKILL : SIGTERM);
      const bool stopped = local::WaitFor([&] {
        return rec->stop_now || !local::ProcessMatches(*sup, {"node-supervisor", dir});
      }, stop_budget);
      if (!stopped) spdlog::warn("local provider: supervisor of {} did not stop; killing it", id);
      if (!stopped || rec->stop_now) kill(*sup, SIGKILL);
    }
    // An nspawn left without its supervisor (the supervisor was killed): kill its node.
    if (auto nspawn = local::ReadPidFile(dir + "/nspawn.pid");
        nspawn && local::ProcessMatches(*nspawn, {"systemd-nspawn", dir + "/merged"})) {
      for (int init : local::ChildPids(*nspawn)) kill(init, SIGKILL);
      // A faulty node goes at once; a frozen nspawn (SIGSTOP, a frozen cgroup) would never
      // notice its init died, and only SIGKILL ends a stopped process.
      if (rec->stop_now ||
          !local::WaitFor([&] { return !local::ProcessMatches(*nspawn, {"systemd-nspawn"}); }, 10s)) {
        kill(*nspawn, SIGKILL);
      }
    }
    // Whatever still runs in the node's cgroups (an nspawn or init orphaned by a killed
    // supervisor, a shell session) dies now: nothing of the node may outlive it.
    if (!local::KillCgroupTree(absl::StrCat("hyperfleet/", fleet_id_, "/", id), 10s)) {
      spdlog::warn("local provider: processes of {} survived SIGKILL", id);
    }
    const std::string merged = dir + "/merged";
    if (local::IsMountPoint(merged) && umount2(merged.c_str(), 0) != 0) {
      umount2(merged.c_str(), MNT_DETACH);
    }
    const std::string ns = LocalNames::NodeNetns(fleet_id_, id);
    if (NetnsExists(ns)) (void)Run({"ip", "netns", "del", ns});
    const std::string veth = LocalNames::NodeVeth(fleet_id_, id);
    if (LinkExists(veth)) (void)Run({"ip", "link", "del", veth});
    for (const std::string& root : local::CgroupHierarchies()) {
      local::RemoveDirsDepthFirst(absl::StrCat(root, "/hyperfleet/", fleet_id_, "/", id));
      rmdir(absl::StrCat(root, "/hyperfleet/", fleet_id_).c_str());  // fails while not empty
      rmdir(absl::StrCat(root, "/hyperfleet").c_str());
    }
    if (!rec->hostname.empty()) {
      std::error_code ec;
      fs::remove_all("/run/systemd/nspawn/propagate/" + rec->hostname, ec);
    }
    if (!local::IsMountPoint(merged)) {
      std::error_code ec;
      fs::remove_all(dir, ec);
      if (ec) spdlog::warn("local provider: cannot remove {}: {}", dir, ec.message());
    } else {
      spdlog::warn("local provider: {} is still mounted; keeping {}", merged, dir);
    }
    {
      std::lock_guard lock(mu_);
      auto it = nodes_.find(id);
      if (it != nodes_.end() && it->second == rec) nodes_.erase(it);
    }
    scheduleHostsRewrite(rec->spec.cluster_id);
    tearDownClusterIfEmpty(rec->spec.cluster_id);
  }

  const Options options_;
  const std::string fleet_id_;
  const std::string root_;
  local::ClusterNetworks networks_;  // firewall, forwarding, nodes' egress files

  mutable std::mutex mu_;  // nodes_, records' fields, workers_
  std::map<std::string, std::shared_ptr<NodeRec>> nodes_;
  std::list<Worker> workers_;
  bool shutting_down_ = false;

  std::mutex hosts_mu_;  // hosts_dirty_, hosts_stop_
  std::condition_variable hosts_cv_;
  std::set<std::string> hosts_dirty_;  // clusters whose nodes need a new /etc/hosts
  bool hosts_stop_ = false;
  std::thread hosts_thread_;

  std::mutex cluster_mu_;  // clusters_ and all bridge / IMDS set-up and tear-down
  std::map<std::string, ClusterNet> clusters_;
};

// ---- LocalProvider ------------------------------------------------------------------------

LocalProvider::LocalProvider(const Options& options) {}
LocalProvider::~LocalProvider() = default;

StatusOr<std::unique_ptr<LocalProvider>> LocalProvider::Create(const Options& options) {
  if (geteuid() != 0) {
    return absl::FailedPreconditionError(
        "the local provider needs root (it creates network namespaces, mounts and cgroups); "
        "run as root or use --provider fake");
  }
  if (!local::HaveProgram("systemd-nspawn")) {
    return absl::FailedPreconditionError(
        "the local provider needs systemd-nspawn (Debian package systemd-container)");
  }
  if (!local::HaveProgram("ip")) {
    return absl::FailedPreconditionError("the local provider needs ip (Debian package iproute2)");
  }
  if (!local::HaveProgram("nft")) {
    return absl::FailedPreconditionError(
        "the local provider needs nft to isolate clusters (Debian package nftables)");
  }
  auto pool = ParseIpv4Prefix(options.node_network);
  if (!pool || pool->second > kSubnetBits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--node-network ", options.node_network, " must be an IPv4 CIDR of /22 or larger"));
  }
  // Every node's systemd takes several inotify instances; the kernel's default of 128 per
  // user stops nodes from booting after a dozen ("Failed to allocate manager object: Too
  // many open files"). Raise the host's limits when they are lower (logged).
  for (const auto& [knob, minimum] : {std::pair{"/proc/sys/fs/inotify/max_user_instances", 8192L},
                                      std::pair{"/proc/sys/fs/inotify/max_user_watches", 1048576L}}) {
    auto text = local::ReadFile(knob);
    long current = 0;
    if (text.ok() && absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &current) &&
        current < minimum) {
      std::ofstream out(knob);
      out << minimum << "\n";
      out.flush();
      if (out) {
        spdlog::info("local provider: raised {} from {} to {} (systemd in every node)", knob,
                     current, minimum);
      } else {
        spdlog::warn("local provider: {} is {}; nodes may fail to boot beyond a dozen", knob,
                     current);
      }
    }
  }
  HF_ASSIGN_OR_RETURN(local::EgressConfig egress, local::MakeEgressConfig(options));
  Options opts = options;
  if (opts.hyperfleet_binary.empty()) {
    std::error_code ec;
    opts.hyperfleet_binary = fs::canonical("/proc/self/exe", ec).string();
  }
  const std::string root = opts.data_dir + "/local";
  HF_RETURN_IF_ERROR(EnsureDirectory(root + "/nodes"));
  HF_RETURN_IF_ERROR(EnsureDirectory(root + "/clusters"));
  std::string fleet_id;
  if (auto text = local::ReadFile(root + "/fleet-id"); text.ok()) {
    fleet_id = std::string(absl::StripAsciiWhitespace(*text));
  }
  if (fleet_id.size() != 6) {
    fleet_id = local::RandomHex(3);
    HF_RETURN_IF_ERROR(local::WriteFileAtomic(root + "/fleet-id", fleet_id + "\n"));
  }
  std::unique_ptr<LocalProvider> p(new LocalProvider(opts));
  p->fleet_id_ = fleet_id;
  p->impl_ = std::make_unique<Impl>(opts, fleet_id, std::move(egress));
  p->impl_->adopt();
  return p;
}

Status LocalProvider::launch(const InstanceSpec& spec) { return impl_->launch(spec); }
Status LocalProvider::terminate(std::string_view id) { return impl_->terminate(id); }
Status LocalProvider::terminateNow(std::string_view id) { return impl_->terminate(id, true); }
Status LocalProvider::powerCycle(std::string_view id) { return impl_->powerCycle(id); }
Status LocalProvider::reboot(std::string_view id) {
  HF_ASSIGN_OR_RETURN(int init, impl_->initPid(id));
  if (kill(init, SIGINT) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot signal the init of node ", std::string(id), ": ", strerror(errno)));
  }
  return absl::OkStatus();
}
StatusOr<std::vector<InstanceObservation>> LocalProvider::list(std::string_view cluster_id) {
  return impl_->list(cluster_id);
}
StatusOr<int> LocalProvider::nodeInitPid(std::string_view id) { return impl_->initPid(id); }
std::string LocalProvider::nodeDir(std::string_view id) const { return impl_->nodeDir(id); }
std::optional<int> LocalProvider::supervisorPidForTest(std::string_view id) const {
  return impl_->supervisorPid(id);
}

}  // namespace hf::provider
