#pragma once
// Task governance on Slurm (docs/governance.md "On Slurm"): the control plane's side of the
// loop. The Slurm controller's agent reports the jobs of governed accounts with every
// heartbeat ("slurm_jobs", slurm_jobs.h); this keeps one governance::slurm::Governor (an
// admission engine and the reported jobs) per cluster, feeds it the stored
// ClusterSchedulerConfig and ComputeQuotas and the instance types of the nodes in Slurm's
// partitions, and renders its job actions for the agent (release, requeuehold, hold,
// disown). It is the shell: store reads, locks, logs and JSON; the Governor decides.
// Nothing new is stored: after a restart the engine is rebuilt from Slurm's view (a
// governed job that runs, or waits released, counts as admitted).
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/clock.h"
#include "hyperfleet/agentapi/protocol.h"
#include "hyperfleet/common/status.h"
#include "hyperfleet/model/instance_catalog.h"
#include "hyperfleet/store/store.h"

namespace hf::control {

/// The engines of every Slurm cluster. Thread-safe: a short lock finds a cluster's state,
/// and each cluster has a lock of its own, so heartbeats of different clusters run in
/// parallel. A heartbeat's work beyond reading the report is proportional to what changed
/// since the previous one (new, ended and changed jobs; bench/governance_loop_bench.cc).
class GovernanceLoop {
 public:
  GovernanceLoop(store::Store& store, const model::InstanceCatalog& catalog, const Clock& clock);
  ~GovernanceLoop();

  /// Handles one heartbeat of cluster `cluster_id`'s Slurm controller agent: `slurm_jobs` is
  /// its report (null when it sent none). Returns what to add to the heartbeat response:
  /// the governance (accounts: the teams; qos: "<class>-priority" with the class's weight)
  /// and the job actions (in job id order) for the jobs whose Slurm state differs from the
  /// engine's decision: "release" (admitted, held), "requeuehold" (runs, not admitted),
  /// "hold" (not admitted and unheld, or held without the "hyperfleet-held" mark: the user
  /// could release it), "disown" (held with a mark, "hyperfleet-governed" or
  /// "hyperfleet-held", but its account is no longer governed: released, every time it is
  /// reported so). Store errors and configurations the engine refuses are logged and give
  /// nullopt (the agent keeps what it has).
  std::optional<agentapi::GovernanceAnswer> onHeartbeat(const std::string& cluster_id,
                                                        const agentapi::SlurmJobsReport* slurm_jobs);

  /// Drops cluster `cluster_id`'s engine and jobs (the cluster was deleted).
  void forget(const std::string& cluster_id);

  /// Why job `job` of cluster `cluster_id` is (not) running: {"JobId", "Team",
  /// "InstanceType", "PriorityClass", "SlurmState", "Verdict", "Reason", "Text" (the
  /// rendering `hyperfleet jobs why` prints), "Resources": [{"Resource", "Request",
  /// "Nominal", "Usage", "BorrowLimit", "Borrowable", "IdleInCohort", "Available",
  /// "Potential"}] (engine units: accelerators, milli-vCPU, MiB; each also in instances of
  /// the type), "JobsAhead", "FirstAhead"}. Errors: NotFound when the cluster reported no
  /// such governed job.
  StatusOr<nlohmann::json> why(const std::string& cluster_id, uint64_t job) const;

  struct ClusterState;

 private:
  store::Store& store_;
  const model::InstanceCatalog& catalog_;
  const Clock& clock_;
  /// The state of `cluster_id`, made when missing and `create`; null otherwise.
  std::shared_ptr<ClusterState> state(const std::string& cluster_id, bool create) const;
  /// Derives st's partition map again when the store's nodes (read only when the cluster's
  /// revision moved) or the report's partitions changed. Errors: the store's.
  Status refreshPartitions(ClusterState& st, const std::string& cluster_id,
                           const agentapi::SlurmJobsReport& slurm_jobs);

  mutable std::mutex mu_;  ///< guards clusters_ only; each ClusterState has its own lock
  mutable std::map<std::string, std::shared_ptr<ClusterState>> clusters_;  ///< by cluster id
};

}  // namespace hf::control
