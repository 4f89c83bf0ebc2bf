#pragma once
// The product engine's simulated node agents and Slurm controller, behind the cluster
// controller's AgentHooks: what agents say is state kept by SimProvider (a heartbeating node
// was heard `now`; a silent one when it fell silent), lifecycle results are recorded on the
// node records by the agent service's own code (agentapi::RecordLifecycleResult), and the
// controller node's agent reports Slurm's node states and applies the planner's marks after
// its next heartbeat, so the planner's "wait until Slurm shows the node down" path runs.
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/common/ids.h"
#include "hyperfleet/model/node_health.h"
#include "hyperfleet/sim/product/sim_provider.h"
#include "hyperfleet/store/store.h"

namespace hf::sim::product {

/// One Slurm node as the simulated slurmctld keeps it.
struct SimSlurmNode {
  bool down = false;      ///< set DOWN (by a mark, or by a user's Action: request)
  std::string reason;
  SystemTime reason_time{};
  bool allocated = false;  ///< the training job runs there
};

class SimAgents {
 public:
  struct Hooks {
    /// A lifecycle result was stored (the agent service's on_change): the controller's
    /// enqueue.
    std::function<void(const std::string& cluster_id)> changed;
    /// Slurm node `name` was set DOWN.
    std::function<void(const std::string& name)> marked_down;
  };

  SimAgents(SimProvider& provider, store::Store& store, SimClock& clock, EventQueue& events,
            IdSource& ids, const ProductLatencies& latencies, SimRng rng, Hooks hooks);

  /// The cluster whose agents these are, and its Slurm controller group.
  void setCluster(model::Cluster cluster, std::string controller_group);

  /// AgentHooks::liveness: every instance's last heartbeat and health, Slurm's view while the
  /// controller node's agent runs.
  model::ClusterHealthView liveness(const std::string& cluster_id);
  /// liveness()'s per-instance part alone (no Slurm view), by instance id; `controller_up`
  /// (optional) says whether the controller group's agent is heard now.
  std::map<std::string, model::NodeLiveness> heartbeats(const std::string& cluster_id,
                                                        bool* controller_up = nullptr) const;
  /// AgentHooks::publish_slurm_marks: applied after slurm_mark (the next heartbeat).
  void publish(const std::string& cluster_id, std::vector<model::SlurmMark> marks);
  /// A booted new instance: its agent reports Started, then Succeeded.
  void startLifecycle(const std::string& instance_id);
  /// A user's (or watchdog's) `scontrol update nodename=<name> state=down reason=<reason>`.
  void userDown(const std::string& name, const std::string& reason);

  /// The Slurm nodes that take work: not DOWN, and the instance answering for the name runs
  /// slurmd.
  std::set<std::string> upNodes() const;
  /// The training job runs on Slurm node `name` (or no longer).
  void setAllocated(const std::string& name, bool allocated);
  const std::map<std::string, SimSlurmNode>& slurm() const { return slurm_; }
  uint64_t version() const { return version_; }

 private:
  void apply();
  bool needed(const model::SlurmMark& m) const;
  /// The instance currently answering for each hostname (the newest not terminating).
  const std::map<std::string_view, const SimInstance*>& byHost() const;

  SimProvider& provider_;
  store::Store& store_;
  SimClock& clock_;
  EventQueue& events_;
  IdSource& ids_;
  const ProductLatencies& latencies_;
  SimRng rng_;
  Hooks hooks_;
  model::Cluster cluster_;
  std::string controller_group_;
  std::map<std::string, SimSlurmNode> slurm_;  ///< by NodeName (hostname)
  std::vector<model::SlurmMark> wanted_;       ///< the marks last published
  bool apply_pending_ = false;
  uint64_t version_ = 0;
  mutable std::map<std::string_view, const SimInstance*> hosts_;  ///< byHost()'s, cached
  mutable uint64_t hosts_version_ = UINT64_MAX;                   ///< provider version of hosts_
};

}  // namespace hf::sim::product
