// Recover: node recoveries (Node::recovery, docs/resiliency.md) carried out. Reboot asks the
// provider once and ends when the instance reports a new boot; Replace terminates the
// instance and adds a record for its successor (same NodeLogicalId and address), which
// Observe() launches once the predecessor is gone.
#include <cmath>

#include "control/plan/work.h"

namespace hf::control::plan {
namespace {

std::string WithReason(const std::string& reason) {
  return reason.empty() ? "" : absl::StrCat(": ", reason);
}

/// Replaces node `i`: its successor record, then its termination.
void ReplaceNode(Work& w, size_t i) {
  const model::Node n = w.nodes[i];
  const Request& request = *n.recovery;
  model::Node r;
  r.cluster_id = n.cluster_id;
  r.instance_id = w.ids.instanceId();
  r.logical_id = n.logical_id;
  r.group = n.group;
  const model::InstanceGroup* g = w.cluster.group(n.group);
  r.instance_type = g ? g->instance_type : n.instance_type;
  r.status = is::kPending;
  r.message = absl::StrCat("Replacing instance ", n.instance_id, WithReason(request.reason));
  r.launch_time = w.now;
  // Same address and name (the provider confirms them once it runs): Slurm knows the node
  // by this name while the replacement boots.
  r.private_ip = n.private_ip;
  r.hostname = n.hostname;
  // The bundle captured when the group was last declared, as HyperPod re-runs it.
  r.lifecycle = g ? g->spec.value("LifeCycleConfig", n.lifecycle) : n.lifecycle;
  r.spec_extras = n.spec_extras;
  r.marks = n.marks;
  r.marks.retry_of.clear();
  r.marks.replacement_of = n.instance_id;
  r.marks.slurm_down_pending = true;
  if (!n.private_ip.empty()) r.marks.requested_ip = n.private_ip;
  w.event("Instance", "Info",
          absl::StrCat("Replacing instance ", n.instance_id, " with ", r.instance_id,
                       " (same NodeLogicalId ", n.logical_id,
                       n.private_ip.empty() ? "" : absl::StrCat(" and address ", n.private_ip),
                       ")", WithReason(request.reason)),
          n.group, n.instance_id,
          json{{"Instance", {{"NodeLogicalId", n.logical_id}}}});
  w.replaced_now.insert_or_assign(n.instance_id, request);
  EndRecovery(w.nodes[i]);
  w.shutDown(i, absl::StrCat("replaced by ", r.instance_id), request.hard);
  w.addRecord(std::move(r));  // launched by Observe() on a later pass
}

/// Asks the provider to reboot node `i` (a power cycle when hard), once it can.
void StartReboot(Work& w, size_t i, const provider::InstanceObservation* o) {
  const model::Node& n = w.nodes[i];
  const Request& request = *n.recovery;
  if (!o) {
    EndRecovery(w.nodes[i]);
    FailNode(w, i, "The instance no longer exists and cannot be rebooted.");
    return;
  }
  // A soft reboot needs a running system to ask; a power cycle does not.
  if (!request.hard && o->state != InstanceState::kRunning) return;  // once it runs
  (request.hard ? w.plan.hard_reboots : w.plan.reboots).push_back(n.instance_id);
  const std::string reason = request.reason;
  model::Node& m = w.nodes[i];
  // The boot it must leave: boot times are only as exact as the kernel's boot second, so
  // "later than the start" alone misses a reboot that takes under a second.
  m.recovery_progress.boot_time_before =
      o->state == InstanceState::kRunning ? o->boot_time : SystemTime{};
  m.recovery_progress.started_at = w.now;
  m.recovery_progress.asked_at = w.now;
  m.recovered_at = w.now;
  m.marks.slurm_down_pending = true;
  w.setStatus(i, is::kPending, absl::StrCat("Rebooting", WithReason(reason)));
  w.dirty[i] = true;
  w.event("Instance", "Info", absl::StrCat("Rebooting instance ", m.instance_id, WithReason(reason)),
          m.group, m.instance_id,
          json{{"Instance", {{"NodeLogicalId", m.logical_id}}}});
}

/// Follows node `i`'s started reboot: done on a new boot, repeated as a power cycle when
/// lost or ignored, failed after the reboot timeout.
void FollowReboot(Work& w, size_t i, const provider::InstanceObservation* o) {
  const model::Node& n = w.nodes[i];
  const model::RecoveryProgress& progress = n.recovery_progress;
  const SystemTime started_at = *progress.started_at;
  const bool running = o && o->state == InstanceState::kRunning;
  const bool new_boot =
      running && (o->boot_time > started_at ||
                  (progress.boot_time_before && o->boot_time != SystemTime{} &&
                   std::abs(ToEpochSeconds(o->boot_time) -
                            ToEpochSeconds(*progress.boot_time_before)) > 0.005));
  if (new_boot) {
    const std::string id = n.instance_id, group = n.group;
    EndRecovery(w.nodes[i]);
    w.setStatus(i, is::kRunning);
    w.dirty[i] = true;
    w.event("Instance", "Info", absl::StrCat("Instance ", id, " rebooted"), group, id);
  } else if (running && w.now - progress.asked_at.value_or(started_at) > std::chrono::seconds(30) &&
             w.now - started_at <= w.snap.reboot_timeout) {
    // Still up on its old boot: the request was lost (e.g. a restart between the commit and
    // the provider call) or the system ignored it (hung). Power-cycle it.
    w.plan.hard_reboots.push_back(n.instance_id);
    w.nodes[i].recovery_progress.asked_at = w.now;
    w.dirty[i] = true;
  } else if (w.now - started_at > w.snap.reboot_timeout) {
    EndRecovery(w.nodes[i]);
    w.dirty[i] = true;
    FailNode(w, i,
             absl::StrCat("The instance did not come back within ",
                          Seconds(w.snap.reboot_timeout), " seconds of its reboot."));
  }
}

}  // namespace

void Recover(Work& w) {
  const size_t count = w.nodes.size();  // replacements are appended
  for (size_t i = 0; i < count; ++i) {
    const model::Node& n = w.nodes[i];
    if (!n.recovery || !IsLive(n)) continue;
    Action action = n.recovery_progress.reboot_instead ? Action::kReboot : n.recovery->action;
    if (action == Action::kReplace && IsController(w, n)) {
      // As on HyperPod: a controller keeps its disk (slurmctld's state, accounting).
      action = Action::kReboot;
      w.nodes[i].recovery_progress.reboot_instead = true;
      w.dirty[i] = true;
      w.event("Instance", "Info",
              absl::StrCat("Instance ", n.instance_id,
                           " runs the Slurm controller: it is rebooted instead of replaced"),
              n.group, n.instance_id);
    }
    const provider::InstanceObservation* o = w.observed(n.instance_id);
    if (action == Action::kReplace) {
      ReplaceNode(w, i);
    } else if (!w.nodes[i].recovery_progress.started_at) {
      StartReboot(w, i, o);
    } else {
      FollowReboot(w, i, o);
    }
  }
}

}  // namespace hf::control::plan
