// Detect: node health (docs/resiliency.md). A node that stopped is Dead, one whose agent is
// silent while it runs is Unresponsive, health reports give HardwareFault / SoftwareFault,
// and a Slurm mark Action:Replace / Action:Reboot asks for that recovery. NodeRecovery
// Automatic starts the recovery (a NodeRecoveryRequest for Recover()); None only reports the
// fault. A failed replacement is retried after a delay that doubles.
#include <algorithm>
#include <optional>

#include "control/plan/work.h"

namespace hf::control::plan {
namespace {

/// What FindFault() found wrong with a node.
struct Finding {
  Source source;        ///< a fault kind, or kSlurmAction (a user's request through Slurm)
  Action action;
  std::string message;  ///< what was seen
  bool hard = false;    ///< the node cannot be asked (dead or hung): power-cycle, kill
};

/// The fault a finding reports; nullopt for a request through Slurm.
std::optional<FaultKind> FaultOf(Source source) {
  switch (source) {
    case Source::kDead: return FaultKind::kDead;
    case Source::kUnresponsive: return FaultKind::kUnresponsive;
    case Source::kHardwareFault: return FaultKind::kHardwareFault;
    case Source::kSoftwareFault: return FaultKind::kSoftwareFault;
    case Source::kReplacementFailed: return FaultKind::kReplacementFailed;
    case Source::kApi:
    case Source::kSlurmAction:
    case Source::kKubernetesLabel: return std::nullopt;
  }
  return std::nullopt;
}

/// NodeRecovery Automatic (the service model's default) rather than None.
bool AutomaticRecovery(const model::Cluster& c) {
  auto it = c.spec.find("NodeRecovery");
  return it == c.spec.end() || !it->is_string() || *it != "None";
}

/// The findings of `health` with `severity`, "check: message; ...".
std::string FailingChecks(const model::HealthReport& health, model::HealthSeverity severity) {
  std::string out;
  for (const auto& f : health.findings) {
    if (f.severity != severity) continue;
    absl::StrAppend(&out, out.empty() ? "" : "; ", f.check, ": ", f.message);
  }
  return out;
}

/// When node `n`'s agent was last heard from, counting from its launch or last recovery,
/// from the control plane's start and from its instance's boot.
SystemTime LastHeard(const Work& w, const model::Node& n, const provider::InstanceObservation& o) {
  SystemTime last = std::max({n.launch_time, n.recovered_at,
                              w.snap.liveness_policy.listening_since, o.boot_time});
  auto it = w.snap.liveness.find(n.instance_id);
  if (it != w.snap.liveness.end()) last = std::max(last, it->second.last_heard);
  return last;
}

/// A user's request through Slurm for node `n`: acted on once the node's jobs have ended
/// (fail, not failing) or at once (down); only a mark set after `since`.
std::optional<Finding> SlurmRequest(const Work& w, const model::Node& n, SystemTime since) {
  const SlurmNodeState* s = SlurmNode(w, n.hostname);
  if (!s || (s->reason != kActionReplace && s->reason != kActionReboot)) return std::nullopt;
  const std::string base = BaseState(s->state);
  // "fail" with CPUs still allocated is failing in all but name (22.05 shows a partly busy
  // node so): its jobs have not ended yet.
  if (!(base == "down" || (base == "fail" && s->alloc_cpus == 0)) || s->reason_time <= since) {
    return std::nullopt;
  }
  return Finding{Source::kSlurmAction,
                 s->reason == kActionReplace ? Action::kReplace : Action::kReboot,
                 absl::StrCat("Slurm node ", s->name, " was set ", base, " with reason \"",
                              s->reason, "\""),
                 false};
}

/// The fault of node `n` (observed as `o`), if any. Pure function of the snapshot.
std::optional<Finding> FindFault(const Work& w, const model::Node& n,
                                 const provider::InstanceObservation* o,
                                 bool silence_is_not_the_nodes) {
  const SystemTime since = std::max(n.launch_time, n.recovered_at);
  std::optional<Finding> found;
  if (w.snap.lifecycle_by_agent) {
    if (!o || o->state == InstanceState::kFailed) {
      return Finding{Source::kDead, Action::kReplace,
                     o ? absl::StrCat("The instance stopped: ", o->message)
                       : "The instance is no longer reported by its provider.",
                     true};
    }
    if (o->state != InstanceState::kRunning) return std::nullopt;  // rebooting by itself
    auto it = w.snap.liveness.find(n.instance_id);
    const SystemTime last = LastHeard(w, n, *o);
    if (w.now - last > w.snap.liveness_policy.unresponsive_after && !silence_is_not_the_nodes) {
      return Finding{Source::kUnresponsive, Action::kReplace,
                     absl::StrCat("No heartbeat from the node agent for ", Seconds(w.now - last),
                                  " s while the instance runs (hung)."),
                     true};
    }
    if (it != w.snap.liveness.end() && it->second.health &&
        it->second.health->checked_at > since) {
      // Ok, warning and a severity this control plane does not know ask for nothing.
      const model::HealthReport& h = *it->second.health;
      using model::HealthSeverity;
      if (h.verdict == HealthSeverity::kHardFault) {
        found = Finding{Source::kHardwareFault, Action::kReplace,
                        absl::StrCat("Health check: ", FailingChecks(h, h.verdict)), false};
      } else if (h.verdict == HealthSeverity::kSoftFault) {
        found = Finding{Source::kSoftwareFault, Action::kReboot,
                        absl::StrCat("Health check: ", FailingChecks(h, h.verdict)), false};
      }
    }
  }
  // A Slurm request wins over a health report, unless it asks less (Reboot for Replace).
  if (auto request = SlurmRequest(w, n, since)) {
    if (request->action == Action::kReplace || !found || found->action != Action::kReplace) {
      found = std::move(request);
    }
  }
  return found;
}

/// Many nodes falling silent at once points at the control plane or the network (a stalled
/// host, a partition), not at that many hung nodes: then silence alone replaces nothing
/// (Kubernetes' node lifecycle controller reasons the same way). Dead nodes and health
/// reports are still acted on. Sets the plan's notice when so.
bool MassSilence(Work& w) {
  int running = 0, silent = 0;
  for (const auto& n : w.nodes) {
    if (n.status != is::kRunning || n.recovery) continue;
    const provider::InstanceObservation* o = w.observed(n.instance_id);
    if (!o || o->state != InstanceState::kRunning) continue;
    ++running;
    if (w.now - LastHeard(w, n, *o) > w.snap.liveness_policy.unresponsive_after) ++silent;
  }
  if (silent < 2 || 2 * silent <= running) return false;
  w.plan.notice = absl::StrCat(silent, " of ", running, " running nodes have been silent for "
                               "more than ", Seconds(w.snap.liveness_policy.unresponsive_after),
                               " s: suspecting the control plane or the network, not the "
                               "nodes; none is replaced for silence");
  return true;
}

/// A failed replacement (node `i`, Failure, no reported fault): reported with its retry time,
/// then replaced again once that time has come.
void RetryFailedReplacement(Work& w, size_t i) {
  model::Node& n = w.nodes[i];
  if (!n.fault) {
    const int attempt = n.marks.replace_attempt;
    const LivenessPolicy& policy = w.snap.liveness_policy;
    Duration delay = policy.retry_delay;
    for (int k = 1; k < attempt && delay < policy.max_retry_delay; ++k) delay *= 2;
    delay = std::min(delay, policy.max_retry_delay);
    n.fault = model::NodeFault{FaultKind::kReplacementFailed, n.message, w.now, w.now + delay};
    w.dirty[i] = true;
    w.event("Instance", "Warn",
            absl::StrCat("Replacement instance ", n.instance_id, " failed (attempt ", attempt,
                         "): ", n.message, " It is replaced again in ", Seconds(delay), " s."),
            n.group, n.instance_id);
    return;
  }
  if (w.now >= n.fault->retry_at) {
    n.marks.replace_attempt += 1;
    n.recovery = Request{Action::kReplace,
                         absl::StrCat("retrying a failed replacement: ", n.fault->message), w.now,
                         /*hard=*/false, Source::kReplacementFailed};
    n.fault.reset();
    w.dirty[i] = true;
  }
}

/// Acts on finding `f` about node `i`: a recovery request (Automatic, or a Slurm request),
/// or a reported fault (NodeRecovery None).
void ActOn(Work& w, size_t i, const Finding& f, bool automatic) {
  model::Node& n = w.nodes[i];
  Action action = f.action;
  std::string note;
  if (action == Action::kReplace && IsController(w, n)) {
    action = Action::kReboot;  // as on HyperPod: controller nodes are not replaced
    note = " Controller nodes are rebooted, not replaced.";
  }
  const std::string where =
      absl::StrCat("instance ", n.instance_id, " (group ", n.group,
                   n.hostname.empty() ? "" : absl::StrCat(", node ", n.hostname), ")");
  const std::string& kind = model::ToString(f.source);  // "Requested" for Slurm's
  const std::optional<FaultKind> fault = FaultOf(f.source);
  if (!automatic && fault) {
    if (n.fault && n.fault->kind == *fault) return;  // reported
    n.fault = model::NodeFault{*fault, f.message, w.now};
    w.dirty[i] = true;
    w.event("Instance", "Warn",
            absl::StrCat(kind, " on ", where, ": ", f.message,
                         " NodeRecovery is None: the node is only reported."),
            n.group, n.instance_id,
            json{{"Instance", {{"NodeLogicalId", n.logical_id}, {"FailureMessage", f.message}}}});
    const bool down = *fault == FaultKind::kDead || *fault == FaultKind::kUnresponsive;
    w.setStatus(i, down ? is::kFailure : is::kRunning, f.message);
    return;
  }
  n.fault.reset();
  n.recovery = Request{action, f.message, w.now, f.hard, f.source};
  w.dirty[i] = true;
  w.event("Instance", fault ? "Warn" : "Info",
          absl::StrCat(kind, " on ", where, ": ", f.message, " ",
                       action == Action::kReplace ? "Replacing" : "Rebooting", " it.", note),
          n.group, n.instance_id,
          json{{"Instance", {{"NodeLogicalId", n.logical_id}}}});
}

/// Before the cluster is in service (or after): a running node that stopped fails, as
/// before monitoring (Observe() left these to Detect()).
void FailStoppedNodes(Work& w) {
  if (!w.snap.lifecycle_by_agent) return;
  for (size_t i = 0; i < w.nodes.size(); ++i) {
    const model::Node& n = w.nodes[i];
    if (n.status != is::kRunning || n.recovery) continue;
    const provider::InstanceObservation* o = w.observed(n.instance_id);
    if (!o) {
      FailNode(w, i, "The instance is no longer reported by its provider.");
    } else if (o->state == InstanceState::kFailed) {
      FailNode(w, i, o->message);
    }
  }
}

}  // namespace

void Detect(Work& w) {
  if (w.cluster.status != cs::kInService && w.cluster.status != cs::kUpdating) {
    FailStoppedNodes(w);
    return;
  }
  const bool automatic = AutomaticRecovery(w.cluster);
  const bool mass_silence = MassSilence(w);
  for (size_t i = 0; i < w.nodes.size(); ++i) {
    model::Node& n = w.nodes[i];
    if (!IsLive(n) || n.recovery) continue;
    const bool reported = n.fault && n.fault->kind != FaultKind::kReplacementFailed;
    if (n.status == is::kFailure && !reported) {
      // Not under Continuous provisioning, where Scale() replaces failed instances itself.
      if (IsReplacement(n) && !w.cluster.continuous()) RetryFailedReplacement(w, i);
      continue;
    }
    if (n.status != is::kRunning && !(n.status == is::kFailure && n.fault)) continue;
    if (auto f = FindFault(w, n, w.observed(n.instance_id), mass_silence)) {
      ActOn(w, i, *f, automatic);
    } else if (n.fault) {
      // A reported fault that went away by itself (NodeRecovery None).
      w.event("Instance", "Info",
              absl::StrCat("Instance ", n.instance_id, " is healthy again (was: ",
                           n.fault->message, ")"),
              n.group, n.instance_id);
      n.fault.reset();
      w.setStatus(i, is::kRunning);
      w.dirty[i] = true;
    }
  }
}

}  // namespace hf::control::plan
