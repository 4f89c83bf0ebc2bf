#pragma once
// SshProvider's implementation, shared by its files:
//   ssh_provider.cc  records (<data_dir>/ssh/nodes/<id>.json), launch/terminate/list, adoption
//   node_work.cc     one node's work over ssh: grant, provision, identity, reboot, cleanup
//   spares.cc        the spare loop (PlanSpares, checks) and the clusters' /etc/hosts blocks
#include <atomic>
#include <condition_variable>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string_view>
#include <string>
#include <thread>
#include <vector>

#include "hyperfleet/common/worker_threads.h"
#include "hyperfleet/provider/ssh_provider.h"
#include "provider/ssh/fsx_mount.h"
#include "provider/ssh/scripts.h"

namespace hf::provider {

class SshProvider::Impl {
 public:
  enum class Phase { kAllocating, kProvisioning, kRunning, kRebooting, kFailed, kTerminating };

  struct NodeRec {
    InstanceSpec spec;
    Phase phase = Phase::kAllocating;
    std::string machine_id;
    MachineAccess access;
    std::string ip, hostname, message, boot_id;
    SystemTime boot_time{};
    bool from_spare = false;
    bool stop_now = false;
    std::shared_ptr<std::mutex> op_mu = std::make_shared<std::mutex>();
  };

  explicit Impl(const Options& options);
  ~Impl();

  Status launch(const InstanceSpec& spec);
  Status terminate(std::string_view id, bool now);
  Status reboot(std::string_view id);
  StatusOr<std::vector<InstanceObservation>> list(std::string_view cluster_id);
  void adopt();
  void startLoop();
  void sparePass();
  void waitIdle();

 private:
  friend class SshProvider;
  // ssh_provider.cc
  void spawn(std::function<void()> fn);
  Status persist(const NodeRec& rec);
  std::string nodeFile(std::string_view id) const;
  SystemTime now() const;

  // node_work.cc
  void setUp(std::shared_ptr<NodeRec> rec);
  void tearDown(std::shared_ptr<NodeRec> rec);
  void doReboot(std::shared_ptr<NodeRec> rec);
  /// Takes a machine for `rec`: the one already serving it (after a restart), else, when
  /// `allocate`, one that hf_pool's Allocate grants. NotFound when none serves it and
  /// !allocate; ResourceExhausted with the pool's shortfall message.
  Status grant(NodeRec& rec, bool allocate = true);
  /// Runs `script` with `command` on `target`, retried while ssh itself fails; a script that
  /// fails is an error naming its last step and the tail of its output.
  StatusOr<hf::ssh::SshResult> runStep(const hf::ssh::SshTarget& target, const std::string& step,
                                   const std::string& command, std::string_view input);
  StatusOr<ssh_scripts::MachineFacts> probe(const hf::ssh::SshTarget& target);
  /// The base layer and the binary (what a hot spare has).
  Status provisionBase(const hf::ssh::SshTarget& target, const std::string& user);
  Status writeIdentity(const NodeRec& rec, const hf::ssh::SshTarget& target);
  Status cleanMachine(const hf::ssh::SshTarget& target);
  /// Applies `report` to machine `machine_id` (CAS, retried). Returns the transition.
  StatusOr<pool::Transition> report(const std::string& machine_id, pool::Report report,
                                    std::string_view reason);
  StatusOr<std::string> mungeKey(const std::string& cluster_id);
  void forgetCluster(const std::string& cluster_id);
  hf::ssh::SshTarget targetOf(const MachineAccess& access) const;
  pool::PoolPolicy policyNow();
  void emit(SshProviderEvent event);

  // node_fsx.cc
  /// The cluster's shared /fsx on the node's machine (FsxMount over this connection's ssh)
  /// unless the machine has its own mount there or the lifecycle scripts mount FSx;
  /// waits until it is up. Idempotent.
  Status startFsx(const NodeRec& rec, const hf::ssh::SshTarget& target);
  /// provisioning_parameters.json of the node's lifecycle bundle (Options), "" when there is
  /// none, no reader, or it cannot be read now (logged).
  std::string provisioningParameters(const InstanceSpec& spec) const;
  /// Stops the node's /fsx supervision (sshfs then leaves the machine).
  void stopFsx(const std::string& instance_id);

  // spares.cc
  void loop();
  void spareStep(const pool::SpareStep& step, const PoolMachine& pm);
  void returnCheck(const PoolMachine& pm);
  Status checkMachine(const hf::ssh::SshTarget& target);
  void scheduleHosts(const std::string& cluster_id);
  void rewriteHosts(const std::string& cluster_id);

  Options options_;
  std::string root_;        // <data_dir>/ssh
  std::string_view binary_;  // the node binary's bytes (mapped read-only: it may be large)
  void* binary_map_ = nullptr;
  size_t binary_size_ = 0;
  std::string binary_sha_;  // its SHA-256 (hex)
  std::string base_script_;

  mutable std::mutex mu_;  // nodes_, workers_, shutting_down_, busy_machines_
  std::map<std::string, std::shared_ptr<NodeRec>, std::less<>> nodes_;
  std::set<std::string> busy_machines_;  // spare/return work under way
  WorkerThreads workers_;
  bool shutting_down_ = false;
  std::mutex pool_mu_;  // one pool decision at a time in this process
  std::mutex cluster_mu_;

  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool loop_stop_ = false;
  std::set<std::string> hosts_dirty_;
  std::thread loop_thread_;
  std::mutex fsx_mu_;
  std::map<std::string, std::unique_ptr<ssh::FsxMount>> fsx_;  // by instance id
};

}  // namespace hf::provider
