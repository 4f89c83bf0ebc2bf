// PlanCluster: the driver. The phases and the working state they share are in plan/
// (plan/work.h lists them); this file only orders them.
#include "hyperfleet/control/cluster_plan.h"

#include "control/plan/work.h"

namespace hf::control {

ClusterPlan PlanCluster(const ClusterSnapshot& snapshot, SystemTime now, IdSource& ids) {
  plan::Work w(snapshot, now, ids);
  plan::Observe(w);
  if (w.cluster.status == model::cluster_status::kDeleting) {
    plan::PlanDeletion(w);
    return std::move(w.plan);
  }
  plan::FinishGroupDeletions(w);
  plan::FailOrRollBack(w);
  plan::Detect(w);
  plan::DetectKubernetesRequests(w);
  plan::Recover(w);
  if (w.cluster.status != model::cluster_status::kFailed) plan::Scale(w);
  plan::MarkSlurmNodes(w);
  plan::LabelKubernetesNodes(w);
  plan::PlanPodRoutes(w);
  plan::Finish(w);
  plan::SetStatus(w);
  return std::move(w.plan);
}

std::optional<Duration> RequeueAfter(const ClusterPlan& plan, Duration active, Duration liveness) {
  if (!plan.settled) return active;
  if (plan.watch_liveness) return liveness;
  return std::nullopt;
}

}  // namespace hf::control
