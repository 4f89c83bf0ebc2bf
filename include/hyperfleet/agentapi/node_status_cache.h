#pragma once
// What the control plane last heard from the node agents: the informer of the cluster
// controller and the governance loop (controller-runtime's term), fed by the agent service.
// Per instance: its cluster, when its agent was last heard, its last health report. Per
// cluster: the Slurm controller agent's view of the Slurm nodes, the marks waiting for that
// agent, and the group running slurmctld.
//
// In memory only, and nothing a decision needs survives only here: a restarted control plane
// starts empty and hears every agent again within a heartbeat (the planner counts silence
// from its own start, docs/resiliency.md), and the controller-first gate reads the store
// (lifecycle_gate.h).
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hyperfleet/agentapi/protocol.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/model/node_health.h"

namespace hf::agentapi {

/// `wire` (a heartbeat's "health") as the control plane keeps it: severities and actions as
/// enums (a string this control plane does not know: kUnknown), checked_at as a time.
model::HealthReport ToModelHealth(const HealthReport& wire);

/// Thread-safe; every method takes one short lock.
class NodeStatusCache {
 public:
  /// `heartbeat_seconds`: the agents' interval (a Slurm view is fresh for max(3 of them,
  /// 5 s); a heartbeat after more than 3 is late).
  NodeStatusCache(const Clock& clock, int heartbeat_seconds);
  NodeStatusCache(const NodeStatusCache&) = delete;
  NodeStatusCache& operator=(const NodeStatusCache&) = delete;

  // ---- The agent service's side

  /// The cluster of `instance_id` as last resolved (a cache of the store's answer); nullopt
  /// when not tracked.
  std::optional<std::string> clusterOf(const std::string& instance_id) const;
  /// Tracks `instance_id` as a node of `cluster_id`.
  void track(const std::string& instance_id, const std::string& cluster_id);
  /// Stops tracking `instance_id` (its record is gone) and drops what it said.
  void untrack(const std::string& instance_id);
  /// Records that `instance_id`'s agent was heard now. Returns the silence before it, or
  /// nullopt the first time and for an instance that is not tracked (nothing is recorded).
  std::optional<Duration> touch(const std::string& instance_id);
  /// Keeps `report` as `instance_id`'s last health report and returns the one it replaces
  /// (a default report, verdict ok and no findings, when there was none), or nullopt,
  /// keeping nothing, when the instance is not tracked (forgotten while its request ran).
  std::optional<model::HealthReport> recordHealth(const std::string& instance_id,
                                                  model::HealthReport report);
  /// The Slurm controller agent's view of cluster `cluster_id`'s Slurm nodes, as of now.
  void setSlurmView(const std::string& cluster_id, std::vector<model::SlurmNodeState> nodes);
  /// The group running slurmctld in cluster `cluster_id` (from its provisioning parameters).
  void setControllerGroup(const std::string& cluster_id, const std::string& group);
  /// The marks for cluster `cluster_id`'s Slurm controller agent (setSlurmMarks).
  std::vector<model::SlurmMark> slurmMarks(const std::string& cluster_id) const;

  // ---- The cluster controller's side

  /// When each instance's agent was last heard from (registration or heartbeat).
  std::map<std::string, SystemTime> lastSeen() const;
  /// Each instance's last health report; instances that sent none are absent.
  std::map<std::string, model::HealthReport> lastHealth() const;
  /// What the agents of `cluster_id` said (docs/resiliency.md): when each tracked instance
  /// was last heard, its last health report, the controller agent's
  /// view of the Slurm nodes when reported within max(3 heartbeats, 5 s), and the group
  /// running slurmctld.
  model::ClusterHealthView clusterHealth(const std::string& cluster_id) const;
  /// The Slurm node changes the controller node's agent of `cluster_id` gets in its next
  /// heartbeat responses; replaces the previous list (an empty one removes it).
  void setSlurmMarks(const std::string& cluster_id, std::vector<model::SlurmMark> marks);
  /// Drops what agents said about instances that no longer exist (`instance_ids`, their
  /// records erased) or, with `cluster_gone`, about every instance of `cluster_id` and the
  /// cluster itself (its Slurm view, marks and controller group). A late request from a
  /// forgotten instance adds nothing back (it is no longer tracked).
  void forget(const std::string& cluster_id, const std::vector<std::string>& instance_ids,
              bool cluster_gone);
  /// How many instances and clusters the cache holds (tests; leak checks).
  std::pair<size_t, size_t> trackedForTest() const;

 private:
  struct Instance {
    std::string cluster_id;
    std::optional<SystemTime> last_seen;
    std::optional<model::HealthReport> health;
  };
  struct Cluster {
    std::optional<std::pair<SystemTime, std::vector<model::SlurmNodeState>>> slurm_view;
    std::vector<model::SlurmMark> marks;
    std::string controller_group;
    bool empty() const { return !slurm_view && marks.empty() && controller_group.empty(); }
  };

  const Clock& clock_;
  const int heartbeat_seconds_;
  mutable std::mutex mu_;
  std::map<std::string, Instance> instances_;  ///< by instance id
  std::map<std::string, Cluster> clusters_;    ///< by cluster id
};

}  // namespace hf::agentapi
