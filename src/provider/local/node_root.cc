// LocalProvider, a node's root (local_provider_impl.h): the overlay over the node image,
// node.json for the supervisor, the identity files written before every boot (hostname,
// hosts, machine-id, munge key, agent.env, AMI facts, the auto-resume plugin's plugstack
// line), and /etc/hosts kept current in every node of a cluster.
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/ipv4.h"
#include "hyperfleet/common/random.h"
#include "provider/local/local_provider_impl.h"
#include "provider/local/sys.h"

namespace hf::provider {
namespace fs = std::filesystem;
using local::kSubnetBits;

StatusOr<std::string> LocalProvider::Impl::eksImageRootfs() {
  if (!options_.eks_image_rootfs.empty()) return options_.eks_image_rootfs;
  std::lock_guard lock(eks_image_mu_);
  if (!eks_image_rootfs_.empty()) return eks_image_rootfs_;
  if (!options_.eks_image) {
    return absl::FailedPreconditionError(
        "EKS node image missing: this server has none (build it as root with `hyperfleet image "
        "build --eks`)");
  }
  auto rootfs = options_.eks_image();
  if (!rootfs.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("EKS node image: ", rootfs.status().message()));
  }
  eks_image_rootfs_ = *rootfs;
  return eks_image_rootfs_;
}

Status LocalProvider::Impl::mountOverlay(const NodeRec& rec) {
  const std::string dir = nodeDir(rec.spec.instance_id);
  const bool eks = rec.spec.image_variant == NodeImageVariant::kEks;
  std::string rootfs = options_.image_rootfs;
  if (eks) {
    HF_ASSIGN_OR_RETURN(rootfs, eksImageRootfs());
  }
  if (!fs::is_directory(rootfs + "/etc")) {
    return absl::FailedPreconditionError(absl::StrCat(eks ? "EKS node image" : "node image",
                                                      " missing: ", rootfs,
                                                      " is not a root filesystem"));
  }
  if (eks) {
    // containerd's state: a plain directory of the node, bound at /var/lib/containerd by the
    // supervisor, deleted with the node's directory.
    HF_RETURN_IF_ERROR(MakeDirs(dir + "/containerd", 0711));
  }
  for (const char* sub : {"/upper", "/work", "/merged"}) {
    HF_RETURN_IF_ERROR(MakeDirs(dir + sub));
  }
  chmod((dir + "/merged").c_str(), 0755);
  chmod((dir + "/upper").c_str(), 0755);
  if (local::IsMountPoint(dir + "/merged")) return absl::OkStatus();
  const std::string data = absl::StrCat("lowerdir=", rootfs, ",upperdir=", dir,
                                        "/upper,workdir=", dir, "/work");
  if (mount("overlay", (dir + "/merged").c_str(), "overlay", 0, data.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot mount the overlay root at ", dir,
                                            "/merged: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

Status LocalProvider::Impl::writeNodeJson(const NodeRec& rec, bool terminating) {
  const std::string dir = nodeDir(rec.spec.instance_id);
  InstanceCaps caps;
  if (options_.instance_caps) {
    if (auto c = options_.instance_caps(rec.spec.instance_type)) caps = *c;
  }
  nlohmann::json j = {
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
  WriteInstanceSpec(rec.spec, j);
  if (rec.spec.image_variant == NodeImageVariant::kEks) j["containerd_dir"] = dir + "/containerd";
  return WriteFileAtomically(dir + "/node.json", j.dump(2) + "\n");
}

// The node supervisor's bind mounts: storage volumes and, on a host with NVIDIA's driver,
// its modules (ami_facts.h).
std::vector<local::NodeBind> LocalProvider::Impl::nodeBinds(const NodeRec& rec) const {
  std::optional<InstanceCaps> caps;
  if (options_.instance_caps) caps = options_.instance_caps(rec.spec.instance_type);
  return local::NodeBinds(
      local::StorageOf(caps ? caps->nvme_gb : 0, rec.spec.secondary_ebs_volume),
      local::HostDriverFacts(), nodeDir(rec.spec.instance_id), local::HostKernelRelease());
}

Status LocalProvider::Impl::writeIdentity(const NodeRec& rec, const NetInfo& net, bool reboot) {
  const std::string m = nodeDir(rec.spec.instance_id) + "/merged";
  // 0755 as on HyperPod's AMI, whatever the server's umask (daemons read below them).
  for (const char* d : {"/etc/hyperfleet", "/opt/ml/config", "/opt/sagemaker_cluster", "/fsx",
                        "/opt/hyperfleet/bin"}) {
    HF_RETURN_IF_ERROR(MakeDirs(m + d, 0755));
  }
  HF_RETURN_IF_ERROR(local::WriteNodeAmiFacts(m, local::HostDriverFacts(),
                                              local::HostKernelRelease(), nodeBinds(rec)));
  HF_RETURN_IF_ERROR(WriteFileAtomically(m + "/etc/hostname", rec.hostname + "\n"));
  HF_RETURN_IF_ERROR(WriteFileAtomically(m + "/etc/hosts", hostsFile(rec.spec.cluster_id)));
  const local::NodeNetwork node_net{
      net.host_ip, absl::StrCat(Ipv4Text(net.base), "/", kSubnetBits), options_.region};
  HF_RETURN_IF_ERROR(networks_.WriteNodeFiles(m, node_net));
  auto machine_id = ReadFile(m + "/etc/machine-id");
  if (!reboot || !machine_id.ok() || machine_id->size() < 32) {
    HF_RETURN_IF_ERROR(WriteFileAtomically(m + "/etc/machine-id", RandomHex(16) + "\n",
                                              0444));
  }
  HF_RETURN_IF_ERROR(writeMungeKey(m, rec.spec.cluster_id));
  const std::string token =
      options_.agent_token ? options_.agent_token(rec.spec.instance_id) : std::string();
  HF_RETURN_IF_ERROR(WriteFileAtomically(
      m + "/etc/hyperfleet/agent.env",
      absl::StrCat("HF_AGENT_URL=http://", net.host_ip, ":", options_.agent_port,
                   "\nHF_INSTANCE_ID=", rec.spec.instance_id, "\nHF_AGENT_TOKEN=", token, "\n",
                   networks_.AgentEnvLines(node_net)),
      0600));
  if (!fs::exists(m + "/opt/hyperfleet/bin/hyperfleet")) {
    HF_RETURN_IF_ERROR(WriteFileAtomically(m + "/opt/hyperfleet/bin/hyperfleet", "", 0755));
  }
  return writeAutoResumePlugin(m);
}

// Installs the cluster's munge key as the node's /etc/munge/munge.key, owned by the node
// image's munge user (munged refuses a key others can read or that it does not own).
Status LocalProvider::Impl::writeMungeKey(const std::string& merged, const std::string& cluster_id) {
  HF_ASSIGN_OR_RETURN(auto key, ReadFile(mungeKeyPath(cluster_id)));
  auto passwd = ReadFile(merged + "/etc/passwd");
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
  HF_RETURN_IF_ERROR(MakeDirs(dir));
  const std::string path = dir + "/munge.key";
  HF_RETURN_IF_ERROR(WriteFileAtomically(path, key, 0400));
  if (chown(path.c_str(), owner->first, owner->second) != 0) {
    return absl::InternalError(absl::StrCat("cannot chown ", path, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

// The srun --auto-resume SPANK plugin built next to the hyperfleet binary
// (src/slurm/spank/), or "" when this build has none (no Slurm headers).
std::string LocalProvider::Impl::spankPlugin() const {
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
Status LocalProvider::Impl::writeAutoResumePlugin(const std::string& m) {
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
  HF_RETURN_IF_ERROR(MakeDirs(m + "/opt/hyperfleet/lib", 0755));  // users' srun loads it
  if (!fs::exists(m + kAutoResumePluginPath)) {
    HF_RETURN_IF_ERROR(WriteFileAtomically(m + kAutoResumePluginPath, "", 0644));
  }
  return WriteFileAtomically(
      conf, absl::StrCat("# srun --auto-resume=1 (docs/slurm.md \"Auto-resume\"), written by "
                         "Hyperfleet's local provider at every boot.\n"
                         "optional ", kAutoResumePluginPath,
                         " supervisor=/opt/hyperfleet/bin/hyperfleet window=20\n"));
}

std::string LocalProvider::Impl::hostsFile(const std::string& cluster_id) {
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
void LocalProvider::Impl::scheduleHostsRewrite(const std::string& cluster_id) {
  {
    std::lock_guard lock(hosts_mu_);
    hosts_dirty_.insert(cluster_id);
  }
  hosts_cv_.notify_all();
}

void LocalProvider::Impl::hostsLoop() {
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
void LocalProvider::Impl::rewriteHosts(const std::string& cluster_id) {
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
    if (local::IsMountPoint(merged)) (void)WriteFileAtomically(merged + "/etc/hosts", hosts);
  }
}

}  // namespace hf::provider
