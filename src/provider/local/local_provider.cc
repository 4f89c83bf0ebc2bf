// The local provider (docs/nodes.md): the Provider operations over node records, each node's
// set-up and tear-down as steps, adoption of an earlier run's nodes, and Create's checks of
// the host. The steps' concerns live beside it (local_provider_impl.h lists the files).
#include "hyperfleet/provider/local_provider.h"

#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/ipv4.h"
#include "hyperfleet/common/random.h"
#include "hyperfleet/common/subprocess.h"
#include "provider/local/address_pool.h"
#include "provider/local/ami_facts.h"
#include "provider/local/cluster_network.h"
#include "provider/local/local_provider_impl.h"
#include "provider/local/sys.h"

namespace hf::provider {
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using local::kSubnetBits;
using local::LinkExists;
using local::NetnsExists;

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

// ---- implementation ----------------------------------------------------------------------

LocalProvider::Impl::Impl(const Options& options, std::string fleet_id,
                          local::EgressConfig egress)
    : options_(options),
      fleet_id_(std::move(fleet_id)),
      root_(options_.data_dir + "/local"),
      networks_(std::move(egress), fleet_id_, root_) {
  hosts_thread_ = std::thread([this] { hostsLoop(); });
}

LocalProvider::Impl::~Impl() {
  WorkerThreads workers;
  {
    std::lock_guard lock(mu_);
    shutting_down_ = true;
    workers = workers_.TakeAll();
  }
  workers.JoinAll();
  {
    std::lock_guard lock(hosts_mu_);
    hosts_stop_ = true;
  }
  hosts_cv_.notify_all();
  hosts_thread_.join();
  {
    std::lock_guard lock(cluster_mu_);
    for (auto& [id, c] : clusters_) {
      if (c.imds_server) c.imds_server->stop();
      if (c.agent_server) c.agent_server->stop();
    }
  }
  // Nodes outlive the server: their supervisors run on (init reaps them later).
  std::lock_guard lock(supervisors_mu_);
  for (auto& [id, supervisor] : supervisors_) {
    if (!supervisor.TryWait()) (void)supervisor.Release();
  }
}

Status LocalProvider::Impl::launch(const InstanceSpec& spec) {
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

Status LocalProvider::Impl::terminate(std::string_view instance_id, bool now) {
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

StatusOr<std::vector<InstanceObservation>> LocalProvider::Impl::list(std::string_view cluster_id) {
  reapSupervisors();  // ended ones of ours, so that none stays a zombie
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
          o.boot_time = local::ProcessStartTime(*init);
        } else if (supervisorPid(o.instance_id)) {
          o.state = InstanceState::kPending;  // booting, or rebooting
        } else if (Status gone = confirmSupervisorGone(o.instance_id); !gone.ok()) {
          return gone;  // no verdict on a node whose processes we cannot read
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

// Scans nodes/*/node.json of an earlier run (docs/nodes.md "A node's life" step 5).
void LocalProvider::Impl::adopt() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root_ + "/nodes", ec)) {
    auto text = ReadFile(entry.path().string() + "/node.json");
    if (!text.ok()) continue;
    const auto j = nlohmann::json::parse(*text, nullptr, false);
    if (!j.is_object()) continue;
    auto rec = std::make_shared<NodeRec>();
    rec->spec = ReadInstanceSpec(j);
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

Status LocalProvider::Impl::powerCycle(std::string_view instance_id) {
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


void LocalProvider::Impl::spawnLocked(std::function<void()> fn) {
  workers_.Spawn(std::move(fn));
}

// A requested address must be a node address of the subnet; otherwise the lowest one no
// node of the cluster has (address_pool.h).
Status LocalProvider::Impl::allocateIp(NodeRec& rec, const NetInfo& net) {
  std::lock_guard lock(mu_);
  local::AddressPool pool(net.base);
  if (!rec.ip.empty()) {
    HF_RETURN_IF_ERROR(pool.CheckNodeAddress(rec.ip));
  } else {
    for (auto& [id, other] : nodes_) {
      if (other->spec.cluster_id == rec.spec.cluster_id) pool.Adopt(other->ip);
    }
    HF_ASSIGN_OR_RETURN(rec.ip, pool.Allocate());
  }
  rec.hostname = LocalNames::Hostname(rec.ip);
  return absl::OkStatus();
}

Status LocalProvider::Impl::setUpNetns(const NodeRec& rec, const NetInfo& net) {
  return local::SetUpNodeNetns(LocalNames::NodeNetns(fleet_id_, rec.spec.instance_id),
                               LocalNames::NodeVeth(fleet_id_, rec.spec.instance_id),
                               net.bridge, rec.ip, networks_.NodeRoutes(net.host_ip));
}

// Stops whatever is left of a node (supervisor, an orphaned nspawn and its init) without
// asking it, then boots it again on the same disk, as after a reboot.
void LocalProvider::Impl::bootAgain(std::shared_ptr<NodeRec> rec) {
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

void LocalProvider::Impl::setUp(std::shared_ptr<NodeRec> rec, bool reboot) {
  std::lock_guard op(*rec->op_mu);
  {
    std::lock_guard lock(mu_);
    if (rec->phase == Phase::kTerminating || shutting_down_) return;
  }
  Status st = [&]() -> Status {
    HF_ASSIGN_OR_RETURN(NetInfo net, ensureCluster(rec->spec.cluster_id));
    HF_RETURN_IF_ERROR(allocateIp(*rec, net));
    const std::string dir = nodeDir(rec->spec.instance_id);
    HF_RETURN_IF_ERROR(MakeDirs(dir));
    HF_RETURN_IF_ERROR(writeNodeJson(*rec, false));
    HF_RETURN_IF_ERROR(setUpNetns(*rec, net));
    HF_RETURN_IF_ERROR(mountOverlay(*rec));
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

void LocalProvider::Impl::tearDown(std::shared_ptr<NodeRec> rec) {
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
  reapSupervisors();
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
  if (NetnsExists(ns)) (void)RunCapture({"ip", "netns", "del", ns});
  const std::string veth = LocalNames::NodeVeth(fleet_id_, id);
  if (LinkExists(veth)) (void)RunCapture({"ip", "link", "del", veth});
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

// ---- LocalProvider ------------------------------------------------------------------------

LocalProvider::LocalProvider(const Options& options) {}
LocalProvider::~LocalProvider() = default;

StatusOr<std::unique_ptr<LocalProvider>> LocalProvider::Create(const Options& options) {
  if (geteuid() != 0) {
    return absl::FailedPreconditionError(
        "the local provider needs root (it creates network namespaces, mounts and cgroups); "
        "run as root or use --provider fake");
  }
  if (!FindProgram("systemd-nspawn")) {
    return absl::FailedPreconditionError(
        "the local provider needs systemd-nspawn (Debian package systemd-container)");
  }
  if (!FindProgram("ip")) {
    return absl::FailedPreconditionError("the local provider needs ip (Debian package iproute2)");
  }
  if (!FindProgram("nft")) {
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
    auto text = ReadFile(knob);
    long current = 0;
    if (text.ok() && absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &current) &&
        current < minimum) {
      if (local::WriteKernelFile(knob, absl::StrCat(minimum, "\n")).ok()) {
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
  HF_RETURN_IF_ERROR(MakeDirs(root + "/nodes"));
  HF_RETURN_IF_ERROR(MakeDirs(root + "/clusters"));
  std::string fleet_id;
  if (auto text = ReadFile(root + "/fleet-id"); text.ok()) {
    fleet_id = std::string(absl::StripAsciiWhitespace(*text));
  }
  if (fleet_id.size() != 6) {
    fleet_id = RandomHex(3);
    HF_RETURN_IF_ERROR(WriteFileAtomically(root + "/fleet-id", fleet_id + "\n"));
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
Status LocalProvider::setPodRoutes(std::string_view cluster_id,
                                   const std::vector<PodRoute>& routes) {
  return impl_->setPodRoutes(std::string(cluster_id), routes);
}
std::string LocalProvider::nodeDir(std::string_view id) const { return impl_->nodeDir(id); }
std::optional<int> LocalProvider::supervisorPidForTest(std::string_view id) const {
  return impl_->supervisorPid(id);
}

}  // namespace hf::provider
