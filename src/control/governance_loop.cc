// The shell around governance::slurm::Governor: per-cluster state and lock, the store reads
// (the nodes only when the cluster's revision moved), logging, and the heartbeat answer's
// answer. Every decision is the Governor's.
#include "hyperfleet/control/governance_loop.h"

#include <chrono>
#include <optional>
#include <set>
#include <vector>

#include "governance_why.h"
#include "hyperfleet/governance/slurm/config.h"
#include "hyperfleet/governance/slurm/governor.h"
#include "hyperfleet/governance/slurm/report.h"
#include "hyperfleet/model/governance.h"
#include "spdlog/spdlog.h"

namespace hf::control {

using nlohmann::json;
namespace gov = hf::governance;
namespace gs = hf::governance::slurm;

/// One cluster: its Governor and what the partition map was derived from.
struct GovernanceLoop::ClusterState {
  std::mutex mu;  ///< one heartbeat or why() of this cluster at a time
  gs::Governor governor;
  gs::PartitionMap partitions;  ///< derived from the two members below
  /// The report's partitions at the last derivation.
  std::map<std::string, std::vector<std::string>> reported_partitions;
  std::map<std::string, std::string> node_types;  ///< the store's nodes: Slurm name -> type
  int64_t nodes_revision = 0;  ///< the cluster's store revision node_types was read at
};

GovernanceLoop::GovernanceLoop(store::Store& store, const model::InstanceCatalog& catalog,
                               const Clock& clock)
    : store_(store), catalog_(catalog), clock_(clock) {}

GovernanceLoop::~GovernanceLoop() = default;

std::shared_ptr<GovernanceLoop::ClusterState> GovernanceLoop::state(const std::string& cluster_id,
                                                                   bool create) const {
  std::lock_guard lock(mu_);
  auto it = clusters_.find(cluster_id);
  if (it != clusters_.end()) return it->second;
  if (!create) return nullptr;
  auto st = std::make_shared<ClusterState>();
  clusters_.emplace(cluster_id, st);
  return st;
}

void GovernanceLoop::forget(const std::string& cluster_id) {
  // A heartbeat still running on the state finishes on its own copy, then it is freed.
  std::lock_guard lock(mu_);
  clusters_.erase(cluster_id);
}

namespace {

/// The heartbeat answer for `config` and `actions`.
agentapi::GovernanceAnswer Render(const gs::Config& config, const gs::Actions& actions) {
  agentapi::GovernanceAnswer out;
  out.governance.accounts.assign(config.teams.begin(), config.teams.end());
  for (const auto& [name, weight] : config.class_weight) {
    out.governance.qos.push_back({name + "-priority", weight});
  }
  for (const auto& a : actions.jobs) {
    out.slurm_job_actions.push_back({a.job, std::string(gs::JobActionName(a.action))});
  }
  return out;
}

void Log(const std::string& cluster_id, const gs::Actions& actions) {
  for (const auto& [team, why] : actions.refused_quotas) {
    spdlog::warn("governance: quota of team {} on {}: {}", team, cluster_id, why);
  }
  for (const auto& a : actions.admitted) {
    for (const auto& v : a.victims) {
      spdlog::info("governance: cluster {} job {} preempted for job {} ({})", cluster_id,
                   v.victim, v.preemptor, gov::PreemptionReasonName(v.reason));
    }
    spdlog::info("governance: cluster {} job {} admitted{}", cluster_id, a.id,
                 a.borrows ? " (borrowing)" : "");
  }
}

}  // namespace

Status GovernanceLoop::refreshPartitions(ClusterState& st, const std::string& cluster_id,
                                         const agentapi::SlurmJobsReport& slurm_jobs) {
  // The store's nodes are read again only when the cluster's revision moved (it moves with
  // every write of its nodes).
  auto cluster = store_.clusterById(cluster_id);
  const int64_t revision = cluster.ok() ? cluster->revision : -1;  // -1: read every time
  const bool first = !st.governor.seen_report();
  bool nodes_changed = first || revision < 0 || revision != st.nodes_revision;
  if (nodes_changed) {
    HF_ASSIGN_OR_RETURN(auto nodes, store_.nodes(cluster_id));
    auto node_types = gs::SlurmNodeTypes(nodes);
    nodes_changed = first || node_types != st.node_types;
    st.node_types = std::move(node_types);
    st.nodes_revision = revision;
  }
  if (nodes_changed || slurm_jobs.partitions != st.reported_partitions) {
    st.partitions = gs::PartitionsOf(gs::ParsePartitions(slurm_jobs), st.node_types);
    st.reported_partitions = slurm_jobs.partitions;
  }
  return absl::OkStatus();
}

std::optional<agentapi::GovernanceAnswer> GovernanceLoop::onHeartbeat(
    const std::string& cluster_id, const agentapi::SlurmJobsReport* slurm_jobs) {
  const std::shared_ptr<ClusterState> slot = state(cluster_id, true);
  ClusterState& st = *slot;
  std::lock_guard lock(st.mu);

  std::optional<gs::Report> report;
  if (slurm_jobs != nullptr) report = gs::ParseReport(*slurm_jobs);
  std::map<std::string, int64_t> instances;  // instance type -> nodes in Slurm's partitions
  if (report) {
    if (Status s = refreshPartitions(st, cluster_id, *slurm_jobs); !s.ok()) {
      spdlog::warn("governance: nodes of {}: {}", cluster_id, s.ToString());
      return std::nullopt;
    }
    instances = st.partitions.instances;
  } else if (st.governor.configured()) {
    for (const auto& c : st.governor.config().capacity) instances[c.name] = c.instances;
  }

  auto policies = store_.schedulerResources(model::governance_kind::kSchedulerConfig, cluster_id);
  auto quotas = store_.schedulerResources(model::governance_kind::kComputeQuota, cluster_id);
  if (!policies.ok() || !quotas.ok()) {
    spdlog::warn("governance: configuration of {}: {}", cluster_id,
                 (policies.ok() ? quotas.status() : policies.status()).ToString());
    return std::nullopt;
  }
  const gs::Config config = gs::ConfigOf(*policies, *quotas, catalog_, instances);
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             clock_.now().time_since_epoch()).count();
  auto actions = st.governor.Step(config, st.partitions, report ? &*report : nullptr, now_ms);
  if (!actions.ok()) {
    spdlog::warn("governance: cluster {}: {}", cluster_id, std::string(actions.status().message()));
    return std::nullopt;
  }
  Log(cluster_id, *actions);
  return Render(config, *actions);
}

StatusOr<json> GovernanceLoop::why(const std::string& cluster_id, uint64_t id) const {
  const std::shared_ptr<ClusterState> st = state(cluster_id, false);
  if (st == nullptr) return RenderWhy(nullptr, id);
  std::lock_guard lock(st->mu);
  return RenderWhy(&st->governor, id);
}

}  // namespace hf::control
