#include "hyperfleet/control/cluster_controller.h"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <map>
#include <string_view>
#include <unordered_map>

#include "hyperfleet/control/cluster_plan.h"

namespace hf::control {

ClusterController::ClusterController(store::Store& store, provider::Provider& provider,
                                     const Clock& clock, IdSource& ids, Options options,
                                     AgentHooks hooks)
    : store_(store), provider_(provider), clock_(clock), ids_(ids), options_(options),
      hooks_(std::move(hooks)) {
  // Silence from before the control plane listened (a restart) is not a node's fault.
  if (options_.liveness.listening_since == SystemTime{}) {
    options_.liveness.listening_since = clock_.now();
  }
}

ClusterController::~ClusterController() { stop(); }

namespace {
/// Tells `forget` which node records (and whether the cluster) `writes` erased.
template <typename Forget>
void ForgetErased(const store::WriteBatch& writes, const std::string& cluster_id,
                  const Forget& forget) {
  std::vector<std::string> erased;
  for (const auto& w : writes.nodes) {
    if (w.erase) erased.push_back(w.node.instance_id);
  }
  bool cluster_gone = false;
  for (const auto& w : writes.clusters) cluster_gone |= w.erase;
  if (!erased.empty() || cluster_gone) forget(cluster_id, erased, cluster_gone);
}
}  // namespace

void ClusterController::start() {
  std::lock_guard lock(mu_);
  if (worker_.joinable()) return;
  stopping_ = false;
  worker_ = std::thread([this] { run(); });
}

void ClusterController::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void ClusterController::enqueue(const std::string& cluster_id) {
  {
    std::lock_guard lock(mu_);
    if (!queued_.insert(cluster_id).second) return;
    queue_.push_back(cluster_id);
  }
  cv_.notify_all();
}

StatusOr<bool> ClusterController::reconcileOnce(const std::string& cluster_id) {
  HF_ASSIGN_OR_RETURN(ClusterPlan plan, reconcile(cluster_id));
  return plan.settled;
}

StatusOr<std::vector<model::Node>> ClusterController::loadNodes(const model::Cluster& cluster) {
  KeptNodes kept;
  if (auto it = kept_nodes_.find(cluster.id); it != kept_nodes_.end()) {
    kept = std::move(it->second);
    kept_nodes_.erase(it);
  }
  if (!kept.nodes.empty() && kept.revision == cluster.revision) return std::move(kept.nodes);
  const int64_t since = kept.nodes.empty() ? 0 : kept.revision;
  HF_ASSIGN_OR_RETURN(store::NodeChanges changes, store_.nodesChangedSince(cluster.id, since));
  auto nodes = store::ApplyNodeChanges(std::move(kept.nodes), std::move(changes));
  // Not kept and not changed since: the kept copy missed a write. Read everything.
  if (!nodes) return store_.nodes(cluster.id);
  return *std::move(nodes);
}

StatusOr<ClusterPlan> ClusterController::reconcile(const std::string& cluster_id) {
  ClusterSnapshot snap;
  auto cluster = store_.clusterById(cluster_id);
  if (!cluster.ok()) {
    kept_nodes_.erase(cluster_id);
    return cluster.status();
  }
  snap.cluster = *std::move(cluster);
  HF_ASSIGN_OR_RETURN(snap.nodes, loadNodes(snap.cluster));
  HF_ASSIGN_OR_RETURN(snap.instances, provider_.list(snap.cluster.id));
  snap.lifecycle_by_agent = provider_.runsLifecycleScripts();
  snap.agent_start_timeout = options_.agent_start_timeout;
  snap.liveness_policy = options_.liveness;
  if (snap.lifecycle_by_agent && hooks_.liveness) {
    ClusterLiveness live = hooks_.liveness(cluster_id);
    snap.liveness = std::move(live.nodes);
    snap.slurm_nodes = std::move(live.slurm_nodes);
    snap.controller_group = std::move(live.controller_group);
  }
  observeKubernetesNodes(snap);
  ClusterPlan plan = PlanCluster(snap, clock_.now(), ids_);
  const size_t node_count = snap.nodes.size();
  // Kept as read (the plan's writes are read back as changes next time), only for a
  // cluster looked at again soon: a settled one would hold them for nothing.
  const bool keep = RequeueAfter(plan, options_.active_interval, options_.liveness_interval)
                        .has_value();
  if (keep) {
    kept_nodes_[cluster_id] = {snap.cluster.revision, std::move(snap.nodes)};
  }
  if (!plan.writes.empty()) {
    auto committed = store_.commit(plan.writes);
    if (!committed.ok()) return committed.status();
    if (hooks_.forget) ForgetErased(plan.writes, cluster_id, hooks_.forget);
  }
  // Provider calls only after the records that name these instances are durable.
  for (const auto& spec : plan.launches) {
    Status s = provider_.launch(spec);
    if (!s.ok()) spdlog::warn("launch {} failed: {}", spec.instance_id, s.ToString());
  }
  for (const auto& id : plan.terminations) {
    Status s = provider_.terminate(id);
    if (!s.ok()) spdlog::warn("terminate {} failed: {}", id, s.ToString());
  }
  for (const auto& id : plan.kills) {
    Status s = provider_.terminateNow(id);
    if (!s.ok()) spdlog::warn("terminate {} failed: {}", id, s.ToString());
  }
  applyKubernetesPlan(snap.cluster, plan);
  applyPodRoutes(snap.cluster, plan);
  for (const auto& id : plan.reboots) {
    Status s = provider_.reboot(id);
    if (!s.ok()) spdlog::warn("reboot {} failed: {}", id, s.ToString());
  }
  for (const auto& id : plan.hard_reboots) {
    Status s = provider_.powerCycle(id);
    if (!s.ok()) spdlog::warn("power cycle {} failed: {}", id, s.ToString());
  }
  if (hooks_.publish_slurm_marks) hooks_.publish_slurm_marks(cluster_id, plan.slurm_marks);
  if (!plan.notice.empty()) {
    // At most once a minute per cluster: the condition lasts for many passes.
    const SteadyTime now = clock_.monotonic();
    auto [it, first] = last_notice_.try_emplace(cluster_id, now);
    SteadyTime& last = it->second;
    if (first || now - last > std::chrono::minutes(1)) {
      spdlog::warn("cluster {}: {}", cluster_id, plan.notice);
      last = now;
    }
  }
  // A pass over a large cluster that settles allocated its whole snapshot; hand that memory
  // back to the system instead of keeping it as free heap for the server's lifetime. A
  // cluster looked at again soon reuses it (and trimming every pass costs as much as a plan).
  if (node_count >= 1000 && !keep) malloc_trim(0);
  return plan;
}

std::optional<SteadyTime> ClusterController::runOnce() {
  std::unique_lock lock(mu_);
  return turn(lock);
}

std::optional<SteadyTime> ClusterController::turn(std::unique_lock<std::mutex>& lock) {
  // Clusters with work in flight are revisited when due; all others at resync.
  const SteadyTime now = clock_.monotonic();
  if (!next_resync_ || now >= *next_resync_) {
    next_resync_ = now + options_.resync_interval;
    lock.unlock();
    auto clusters = store_.allClusters();
    lock.lock();
    if (clusters.ok()) {
      for (const auto& c : *clusters) {
        if (queued_.insert(c.id).second) queue_.push_back(c.id);
      }
    } else {
      spdlog::error("resync: {}", clusters.status().ToString());
    }
  }
  for (auto it = due_.begin(); it != due_.end();) {
    if (it->second <= now) {
      if (queued_.insert(it->first).second) queue_.push_back(it->first);
      it = due_.erase(it);
    } else {
      ++it;
    }
  }
  if (queue_.empty()) {
    SteadyTime wake = *next_resync_;
    for (const auto& [id, t] : due_) wake = std::min(wake, t);
    return wake;
  }
  std::string id = queue_.front();
  queue_.pop_front();
  queued_.erase(id);
  lock.unlock();
  auto plan = reconcile(id);
  lock.lock();
  std::optional<Duration> requeue_after;
  if (plan.ok()) {
    requeue_after =
        RequeueAfter(*plan, options_.active_interval, options_.liveness_interval);
  } else if (!absl::IsNotFound(plan.status())) {
    // A lost CAS race or a transient error: try again soon.
    spdlog::debug("reconcile {}: {}", id, plan.status().ToString());
    requeue_after = options_.active_interval;
  }
  if (requeue_after) due_[id] = clock_.monotonic() + *requeue_after;
  return std::nullopt;
}

void ClusterController::run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const std::optional<SteadyTime> wake = turn(lock);
    if (!wake) continue;
    // Sleeps in real time for the clock's interval (the same under the real clock).
    cv_.wait_for(lock, *wake - clock_.monotonic(),
                 [&] { return stopping_ || !queue_.empty(); });
  }
}

}  // namespace hf::control
