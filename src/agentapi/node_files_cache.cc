#include "hyperfleet/agentapi/node_files_cache.h"

#include <string_view>
#include <unordered_set>
#include <utility>

namespace hf::agentapi {

NodeFilesCache::NodeFilesCache(store::Store& store, const Clock& clock)
    : store_(store), clock_(clock) {}

std::shared_ptr<NodeFilesCache::Entry> NodeFilesCache::entry(const std::string& cluster_id) {
  const SteadyTime now = clock_.monotonic();
  std::lock_guard lock(mu_);
  if (auto it = entries_.find(cluster_id); it != entries_.end()) {
    it->second.used = now;
    return it->second.entry;
  }
  // A new cluster is rare: the time to drop those no node asked about for long (deleted).
  std::erase_if(entries_, [&](const auto& kv) { return now - kv.second.used > kIdle; });
  auto e = std::make_shared<Entry>();
  entries_[cluster_id] = {e, now};
  return e;
}

void NodeFilesCache::forget(const std::string& cluster_id) {
  std::lock_guard lock(mu_);
  entries_.erase(cluster_id);
}

Status NodeFilesCache::refresh(Entry& e, const model::Cluster& cluster) {
  const Snapshot* old = e.snapshot.get();
  const int64_t since = old != nullptr ? old->revision : 0;
  HF_ASSIGN_OR_RETURN(store::NodeChanges changes, store_.nodesChangedSince(cluster.id, since));
  auto snap = std::make_shared<Snapshot>();
  snap->revision = cluster.revision;
  snap->cluster = cluster;
  std::vector<model::Node> kept;
  if (old != nullptr) kept = old->nodes;  // shared with heartbeats still using it
  if (auto nodes = store::ApplyNodeChanges(std::move(kept), std::move(changes))) {
    snap->nodes = std::move(*nodes);
  } else {
    HF_ASSIGN_OR_RETURN(snap->nodes, store_.nodes(cluster.id));
  }
  snap->resource_config = ResourceConfigText(snap->cluster, snap->nodes);
  snap->resource_config_hash = std::hash<std::string>{}(snap->resource_config);
  // Nodes erased since are forgotten; the others' memos stay (their keys say whether their
  // files changed).
  std::unordered_set<std::string_view> ids;
  ids.reserve(snap->nodes.size());
  for (const auto& n : snap->nodes) ids.insert(n.instance_id);
  std::erase_if(e.memos, [&](const auto& kv) { return !ids.contains(kv.first); });
  e.slurm.clear();
  e.snapshot = std::move(snap);
  return absl::OkStatus();
}

std::shared_ptr<const SlurmFiles> NodeFilesCache::slurmFor(
    Entry& e, const std::optional<nlohmann::json>& params) {
  for (const auto& [p, files] : e.slurm) {
    if (p == params) return files;
  }
  auto files = std::make_shared<const SlurmFiles>(
      BuildSlurmFiles(e.snapshot->cluster, e.snapshot->nodes, params));
  e.slurm.emplace_back(params, files);
  return files;
}

StatusOr<NodeFilesCache::Result> NodeFilesCache::get(const model::Cluster& cluster,
                                                     const model::Node& node,
                                                     const std::optional<nlohmann::json>& params,
                                                     std::optional<int64_t> agent_revision,
                                                     const std::vector<NodeFile>& extra) {
  std::shared_ptr<Entry> e = entry(cluster.id);
  Result out;
  std::shared_ptr<const SlurmFiles> slurm;
  std::optional<Memo> memo;
  {
    std::lock_guard lock(e->mu);
    // A snapshot newer than the caller's cluster record is as good (the caller read before
    // another heartbeat refreshed it).
    if (!e->snapshot || e->snapshot->revision < cluster.revision) {
      HF_RETURN_IF_ERROR(refresh(*e, cluster));
    }
    out.snapshot = e->snapshot;
    if (node.lifecycle.is_object()) slurm = slurmFor(*e, params);
    if (auto it = e->memos.find(node.instance_id); it != e->memos.end()) memo = it->second;
  }
  const Snapshot& snap = *out.snapshot;
  const NodeFilesPlan plan = PlanNodeFiles(snap.cluster, node, snap.resource_config,
                                           snap.resource_config_hash, slurm.get(), params,
                                           extra);
  out.controller_group = plan.controller_group;
  out.roles_error = plan.roles_error;
  if (plan.slurm) out.slurm = slurm;
  if (memo && memo->key == plan.key) {
    out.revision = memo->revision;
    if (agent_revision == out.revision) return out;  // the common case: nothing to copy
  }
  NodeFiles files = MaterializeNodeFiles(plan);
  out.revision = files.revision;
  {
    std::lock_guard lock(e->mu);
    e->memos[node.instance_id] = {plan.key, files.revision};
  }
  if (agent_revision != out.revision) out.files = std::move(files.files);
  return out;
}

}  // namespace hf::agentapi
