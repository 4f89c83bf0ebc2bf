// Scale: each declared group converges to InstanceCount live instances; groups in
// InstanceGroupsToDelete lose theirs, then leave the cluster (active transitions;
// docs/state-machines.md).
#include <algorithm>
#include <set>

#include "control/plan/work.h"

namespace hf::control::plan {
namespace {

/// Orders surplus instances for removal: failed, then pending, then newest running.
int RemovalRank(const model::Node& n) {
  if (n.status == is::kFailure) return 0;
  if (n.status == is::kPending) return 1;
  return 2;
}

/// Brings group `g` to its target: adds nodes (retries of the failed ones Continuous
/// provisioning shuts down) or removes the surplus in RemovalRank order.
void ScaleGroup(Work& w, const model::InstanceGroup& g) {
  const bool continuous = w.cluster.continuous();
  std::vector<size_t> live;
  std::vector<std::string> replaced;
  for (size_t i = 0; i < w.nodes.size(); ++i) {
    if (w.nodes[i].group != g.name || !IsLive(w.nodes[i])) continue;
    if (continuous && w.nodes[i].status == is::kFailure) {
      replaced.push_back(w.nodes[i].instance_id);
      w.shutDown(i, "replacing a failed instance (Continuous provisioning)");
      continue;
    }
    live.push_back(i);
  }
  const int have = static_cast<int>(live.size());
  if (have < g.target_count) {
    if (!continuous && w.cluster.status == cs::kFailed) return;
    for (int k = have; k < g.target_count; ++k) {
      const size_t r = static_cast<size_t>(k - have);
      w.addNode(g, r < replaced.size() ? replaced[r] : "");
    }
  } else if (have > g.target_count) {
    std::stable_sort(live.begin(), live.end(), [&](size_t a, size_t b) {
      int ra = RemovalRank(w.nodes[a]), rb = RemovalRank(w.nodes[b]);
      if (ra != rb) return ra < rb;
      return w.nodes[a].launch_time > w.nodes[b].launch_time;
    });
    for (int k = 0; k < have - g.target_count; ++k) {
      w.shutDown(live[k], absl::StrCat("scaling group ", g.name, " down to ", g.target_count));
    }
  }
}

}  // namespace

void FinishGroupDeletions(Work& w) {
  // A group is gone once no record names it (records stay until the provider no longer
  // reports their instance).
  std::set<std::string> groups_with_nodes;
  for (const auto& n : w.nodes) groups_with_nodes.insert(n.group);
  std::vector<std::string> still_deleting;
  for (const auto& name : w.cluster.groups_deleting) {
    if (groups_with_nodes.count(name)) {
      still_deleting.push_back(name);
    } else {
      w.event("InstanceGroup", "Info", absl::StrCat("Instance group ", name, " deleted"), name);
    }
  }
  w.cluster.groups_deleting = still_deleting;
}

void Scale(Work& w) {
  for (const auto& name : w.cluster.groups_deleting) {
    for (size_t i = 0; i < w.nodes.size(); ++i) {
      if (w.nodes[i].group == name) w.shutDown(i, "its instance group is being deleted");
    }
  }
  for (const auto& g : w.cluster.groups) ScaleGroup(w, g);
}

}  // namespace hf::control::plan
