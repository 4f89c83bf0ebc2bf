#pragma once
// LocalProvider's implementation, shared by the files that hold its concerns (internal to
// hf_local_provider):
//   local_provider.cc     the Provider operations, node records, set-up and tear-down steps
//   cluster_setup.cc      per cluster: subnet, bridge, munge key, IMDS namespace, agent endpoint
//   imds.{h,cc}           the IMDSv2 endpoint's answers and its listening socket (no Impl)
//   node_root.cc          a node's root: overlay, node.json, identity files, /etc/hosts
//   supervisor_launch.cc  the detached node supervisor: start, find, reap; the node's init
//   address_pool.{h,cc}   node addresses of a cluster subnet (pure)
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "hyperfleet/common/worker_threads.h"
#include "hyperfleet/common/subprocess.h"
#include "hyperfleet/http/http_server.h"
#include "hyperfleet/provider/local_provider.h"
#include "provider/local/ami_facts.h"
#include "provider/local/cluster_network.h"
#include "provider/local/imds.h"

namespace hf::provider {

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
    std::shared_ptr<local::ImdsTokens> tokens = std::make_shared<local::ImdsTokens>();
  };
  struct NetInfo {
    uint32_t base;
    std::string bridge, host_ip;
  };

  Impl(const Options& options, std::string fleet_id, local::EgressConfig egress);
  ~Impl();

  std::string nodeDir(std::string_view id) const { return root_ + "/nodes/" + std::string(id); }

  // ---- the Provider operations (local_provider.cc) ----
  Status launch(const InstanceSpec& spec);
  Status terminate(std::string_view instance_id, bool now = false);
  /// Errors: Unavailable when a node's processes cannot be read (e.g. out of file
  /// descriptors): an unreadable /proc is never taken for a stopped node.
  StatusOr<std::vector<InstanceObservation>> list(std::string_view cluster_id);
  /// Scans nodes/*/node.json of an earlier run (docs/nodes.md "A node's life" step 5).
  void adopt();
  Status powerCycle(std::string_view instance_id);
  /// Provider::setPodRoutes on the cluster's bridge (cluster_setup.cc).
  Status setPodRoutes(const std::string& cluster_id, const std::vector<PodRoute>& routes);

  // ---- the supervisor (supervisor_launch.cc) ----
  std::optional<int> supervisorPid(std::string_view id) const;
  StatusOr<int> initPid(std::string_view id) const;
  /// OK when node `id`'s supervisor has certainly ended (no pid file, no such process, or
  /// its pid now runs another program); Unavailable when that cannot be told.
  Status confirmSupervisorGone(std::string_view id) const;

 private:

  // ---- node records and steps (local_provider.cc) ----
  void spawnLocked(std::function<void()> fn);
  Status allocateIp(NodeRec& rec, const NetInfo& net);
  Status setUpNetns(const NodeRec& rec, const NetInfo& net);
  void bootAgain(std::shared_ptr<NodeRec> rec);
  void setUp(std::shared_ptr<NodeRec> rec, bool reboot);
  void tearDown(std::shared_ptr<NodeRec> rec);

  // ---- per cluster (cluster_setup.cc) ----
  StatusOr<NetInfo> ensureCluster(const std::string& cluster_id);
  Status setUpImds(const std::string& cluster_id, ClusterNet& c);
  void tearDownClusterIfEmpty(const std::string& cluster_id);
  std::string mungeKeyPath(const std::string& cluster_id) const;
  std::optional<local::ImdsNode> imdsNode(const std::string& cluster_id,
                                          std::string_view remote) const;

  // ---- a node's root (node_root.cc) ----
  std::vector<local::NodeBind> nodeBinds(const NodeRec& rec) const;
  Status writeNodeJson(const NodeRec& rec, bool terminating);
  Status mountOverlay(const NodeRec& rec);
  /// The EKS node image's root: Options::eks_image_rootfs, else Options::eks_image's answer
  /// (asked once it is ok). Errors: FailedPrecondition saying how to build it.
  StatusOr<std::string> eksImageRootfs();
  Status writeMungeKey(const std::string& merged, const std::string& cluster_id);
  Status writeIdentity(const NodeRec& rec, const NetInfo& net, bool reboot);
  std::string spankPlugin() const;
  Status writeAutoResumePlugin(const std::string& m);
  std::string hostsFile(const std::string& cluster_id);
  void scheduleHostsRewrite(const std::string& cluster_id);
  void hostsLoop();
  void rewriteHosts(const std::string& cluster_id);

  // ---- the supervisor (supervisor_launch.cc) ----
  Status startSupervisor(const std::string& dir);
  /// Reaps supervisors this server started that have ended (they are its children).
  void reapSupervisors();

  const Options options_;
  const std::string fleet_id_;
  const std::string root_;
  local::ClusterNetworks networks_;  // firewall, forwarding, nodes' egress files

  mutable std::mutex mu_;  // nodes_, records' fields, workers_
  std::map<std::string, std::shared_ptr<NodeRec>> nodes_;
  WorkerThreads workers_;
  bool shutting_down_ = false;

  std::mutex hosts_mu_;  // hosts_dirty_, hosts_stop_
  std::condition_variable hosts_cv_;
  std::set<std::string> hosts_dirty_;  // clusters whose nodes need a new /etc/hosts
  bool hosts_stop_ = false;
  std::thread hosts_thread_;

  std::mutex cluster_mu_;  // clusters_ and all bridge / IMDS set-up and tear-down
  std::map<std::string, ClusterNet> clusters_;

  // Supervisors this server started, by node id, until they end: they are its children, so
  // it reaps them; at destruction they are released to outlive it (docs/nodes.md).
  std::mutex supervisors_mu_;
  std::map<std::string, Subprocess> supervisors_;

  std::mutex eks_image_mu_;       // eks_image_rootfs_; held while Options::eks_image runs
  std::string eks_image_rootfs_;  // Options::eks_image's answer, once ok
};

}  // namespace hf::provider
