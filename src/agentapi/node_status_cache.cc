#include "hyperfleet/agentapi/node_status_cache.h"

#include <algorithm>
#include <chrono>

namespace hf::agentapi {

model::HealthReport ToModelHealth(const HealthReport& wire) {
  model::HealthReport out;
  out.verdict = model::ParseHealthSeverity(wire.verdict);
  out.action = model::ParseHealthAction(wire.action);
  out.checked_at = FromEpochSeconds(wire.checked_at);
  out.duration = std::chrono::milliseconds(wire.duration_ms);
  out.findings.reserve(wire.findings.size());
  for (const auto& f : wire.findings) {
    out.findings.push_back({f.check, model::ParseHealthSeverity(f.severity),
                            model::ParseHealthAction(f.action), f.message});
  }
  return out;
}

NodeStatusCache::NodeStatusCache(const Clock& clock, int heartbeat_seconds)
    : clock_(clock), heartbeat_seconds_(heartbeat_seconds) {}

std::optional<std::string> NodeStatusCache::clusterOf(const std::string& instance_id) const {
  std::lock_guard lock(mu_);
  auto it = instances_.find(instance_id);
  if (it == instances_.end()) return std::nullopt;
  return it->second.cluster_id;
}

void NodeStatusCache::track(const std::string& instance_id, const std::string& cluster_id) {
  std::lock_guard lock(mu_);
  instances_[instance_id].cluster_id = cluster_id;
}

void NodeStatusCache::untrack(const std::string& instance_id) {
  std::lock_guard lock(mu_);
  instances_.erase(instance_id);
}

std::optional<Duration> NodeStatusCache::touch(const std::string& instance_id) {
  const SystemTime now = clock_.now();
  std::lock_guard lock(mu_);
  auto it = instances_.find(instance_id);
  if (it == instances_.end()) return std::nullopt;  // forgotten while its request ran
  std::optional<Duration> gap;
  if (it->second.last_seen) gap = now - *it->second.last_seen;
  it->second.last_seen = now;
  return gap;
}

std::optional<model::HealthReport> NodeStatusCache::recordHealth(const std::string& instance_id,
                                                                 model::HealthReport report) {
  std::lock_guard lock(mu_);
  auto it = instances_.find(instance_id);
  if (it == instances_.end()) return std::nullopt;
  model::HealthReport before = it->second.health.value_or(model::HealthReport{});
  it->second.health = std::move(report);
  return before;
}

void NodeStatusCache::setSlurmView(const std::string& cluster_id,
                                   std::vector<model::SlurmNodeState> nodes) {
  const SystemTime now = clock_.now();
  std::lock_guard lock(mu_);
  clusters_[cluster_id].slurm_view.emplace(now, std::move(nodes));
}

void NodeStatusCache::setControllerGroup(const std::string& cluster_id,
                                         const std::string& group) {
  std::lock_guard lock(mu_);
  clusters_[cluster_id].controller_group = group;
}

std::vector<model::SlurmMark> NodeStatusCache::slurmMarks(const std::string& cluster_id) const {
  std::lock_guard lock(mu_);
  auto it = clusters_.find(cluster_id);
  return it == clusters_.end() ? std::vector<model::SlurmMark>() : it->second.marks;
}

std::map<std::string, SystemTime> NodeStatusCache::lastSeen() const {
  std::lock_guard lock(mu_);
  std::map<std::string, SystemTime> out;
  for (const auto& [id, i] : instances_) {
    if (i.last_seen) out.emplace(id, *i.last_seen);
  }
  return out;
}

std::map<std::string, model::HealthReport> NodeStatusCache::lastHealth() const {
  std::lock_guard lock(mu_);
  std::map<std::string, model::HealthReport> out;
  for (const auto& [id, i] : instances_) {
    if (i.health) out.emplace(id, *i.health);
  }
  return out;
}

model::ClusterHealthView NodeStatusCache::clusterHealth(const std::string& cluster_id) const {
  model::ClusterHealthView view;
  const SystemTime now = clock_.now();
  const Duration fresh = std::max<Duration>(std::chrono::seconds(3 * heartbeat_seconds_),
                                            std::chrono::seconds(5));
  std::lock_guard lock(mu_);
  for (const auto& [id, i] : instances_) {
    if (i.cluster_id != cluster_id) continue;
    model::NodeLiveness& l = view.nodes[id];
    l.last_heard = i.last_seen.value_or(SystemTime{});
    l.health = i.health;
  }
  if (auto it = clusters_.find(cluster_id); it != clusters_.end()) {
    const Cluster& c = it->second;
    if (c.slurm_view && now - c.slurm_view->first <= fresh) view.slurm_nodes = c.slurm_view->second;
    view.controller_group = c.controller_group;
  }
  return view;
}

void NodeStatusCache::setSlurmMarks(const std::string& cluster_id,
                                    std::vector<model::SlurmMark> marks) {
  std::lock_guard lock(mu_);
  if (marks.empty()) {
    auto it = clusters_.find(cluster_id);
    if (it == clusters_.end()) return;
    it->second.marks.clear();
    if (it->second.empty()) clusters_.erase(it);
    return;
  }
  clusters_[cluster_id].marks = std::move(marks);
}

void NodeStatusCache::forget(const std::string& cluster_id,
                             const std::vector<std::string>& instance_ids, bool cluster_gone) {
  std::lock_guard lock(mu_);
  for (const auto& id : instance_ids) instances_.erase(id);
  if (!cluster_gone) return;
  std::erase_if(instances_, [&](const auto& entry) { return entry.second.cluster_id == cluster_id; });
  clusters_.erase(cluster_id);
}

std::pair<size_t, size_t> NodeStatusCache::trackedForTest() const {
  std::lock_guard lock(mu_);
  return {instances_.size(), clusters_.size()};
}

}  // namespace hf::agentapi
