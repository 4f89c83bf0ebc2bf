#include "hyperfleet/control/cluster_plan.h"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <optional>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace hf::control {
namespace {

namespace cs = model::cluster_status;
namespace is = model::instance_status;
using nlohmann::json;
using provider::InstanceState;
using Request = model::NodeRecoveryRequest;
using Action = Request::Action;
using Source = Request::Source;
using FaultKind = model::NodeFault::Kind;

/// Working state of one planning pass: node records as they will be after the plan.
struct Work {
  const ClusterSnapshot& snap;
  SystemTime now;
  IdSource& ids;
  ClusterPlan plan;
  model::Cluster cluster;
  std::vector<model::Node> nodes;       // live records after this plan
  std::vector<bool> dirty;              // per node: needs a write
  std::vector<int64_t> expected;        // per node: revision read (0 for new)

  Work(const ClusterSnapshot& s, SystemTime n, IdSource& i)
      : snap(s), now(n), ids(i), cluster(s.cluster), nodes(s.nodes),
        dirty(s.nodes.size(), false) {
    for (const auto& node : s.nodes) expected.push_back(node.revision);
  }

  void event(std::string resource_type, std::string level, std::string description,
             std::string group = "", std::string instance_id = "", json metadata = json()) {
    plan.writes.events.push_back(model::MakeEvent(
        ids.eventId(), cluster.id, now,
        {std::move(resource_type), std::move(level), std::move(description), std::move(group),
         std::move(instance_id), std::move(metadata)}));
  }

  void setStatus(size_t i, model::InstanceStatus status, std::string message = "") {
    if (nodes[i].status == status && nodes[i].message == message) return;
    nodes[i].status = status;
    nodes[i].message = std::move(message);
    dirty[i] = true;
  }

  /// Terminates node `i`; `now_and_hard` skips the clean shutdown (a faulty node).
  void shutDown(size_t i, const std::string& why, bool now_and_hard = false) {
    if (nodes[i].status == is::kShuttingDown) return;
    setStatus(i, is::kShuttingDown);
    (now_and_hard ? plan.kills : plan.terminations).push_back(nodes[i].instance_id);
    event("Instance", "Info",
          absl::StrCat("Terminating instance ", nodes[i].instance_id, ": ", why),
          nodes[i].group, nodes[i].instance_id);
  }

  provider::InstanceSpec specFor(const model::Node& n) const {
    provider::InstanceSpec spec{n.instance_id, cluster.id, cluster.name, n.group,
                                n.instance_type, n.lifecycle, n.marks.requested_ip};
    spec.secondary_ebs_volume = provider::HasSecondaryEbsVolume(
        n.spec_extras.value("InstanceStorageConfigs", json()));
    return spec;
  }

  /// Adds a node to group `g`; `retry_of` names the failed instance it replaces
  /// (Continuous provisioning), which the cluster's status does not wait for.
  void addNode(const model::InstanceGroup& g, const std::string& retry_of = "") {
    model::Node n;
    n.cluster_id = cluster.id;
    n.instance_id = ids.instanceId();
    n.logical_id = absl::StrCat(g.name, "-", ids.logicalIdSuffix());
    n.group = g.name;
    n.instance_type = g.instance_type;
    n.status = is::kPending;
    n.launch_time = now;
    n.lifecycle = g.spec.value("LifeCycleConfig", json());
    n.spec_extras = model::NodeSpecMembers(g);
    n.marks.retry_of = retry_of;
    plan.launches.push_back(specFor(n));
    nodes.push_back(std::move(n));
    dirty.push_back(true);
    expected.push_back(store::kMustNotExist);
  }
};

/// Marks node `i` failed with `message` (its InstanceStatus.Message) and says so in an event.
void FailNode(Work& w, size_t i, const std::string& message) {
  const auto& n = w.nodes[i];
  w.event("Instance", "Error",
          absl::StrCat("Instance ", n.instance_id, " in group ", n.group, " failed: ", message),
          n.group, n.instance_id,
          json{{"Instance", {{"NodeLogicalId", n.logical_id}, {"FailureMessage", message}}}});
  w.setStatus(i, is::kFailure, message);
}

/// Whether node `n` is a Continuous-mode retry of a failed instance.
bool IsRetry(const model::Node& n) { return !n.marks.retry_of.empty(); }

/// Ends node `n`'s recovery (done, failed or handed over to a replacement).
void EndRecovery(model::Node& n) {
  n.recovery.reset();
  n.recovery_progress = {};
}

/// Reflects what the provider reports into the node records (passive transitions).
void Observe(Work& w) {
  std::map<std::string, const provider::InstanceObservation*> by_id;
  for (const auto& o : w.snap.instances) by_id[o.instance_id] = &o;
  for (size_t i = 0; i < w.nodes.size(); ++i) {
    auto& n = w.nodes[i];
    auto it = by_id.find(n.instance_id);
    const provider::InstanceObservation* o = it == by_id.end() ? nullptr : it->second;
    if (n.status == is::kShuttingDown) {
      if (!o) continue;  // gone: erased below
      if (o->state != InstanceState::kTerminating) w.plan.terminations.push_back(n.instance_id);
      continue;
    }
    if (!o) {
      const std::string& pred = n.marks.replacement_of;
      if (n.status == is::kPending && !pred.empty() && by_id.count(pred)) {
        continue;  // a replacement starts once its predecessor has released the address
      }
      if (n.status == is::kPending) {
        // Launch (again): idempotent by id. Not for a cluster being deleted, which only
        // terminates (the record goes once the provider confirms it has no such instance).
        if (w.cluster.status != cs::kDeleting) w.plan.launches.push_back(w.specFor(n));
      } else if (n.status == is::kRunning && !w.snap.lifecycle_by_agent) {
        w.setStatus(i, is::kFailure, "The instance is no longer reported by its provider.");
        w.event("Instance", "Error",
                absl::StrCat("Instance ", n.instance_id, " disappeared from its provider"),
                n.group, n.instance_id);
      }
      continue;
    }
    if (!o->private_ip.empty() && (n.private_ip != o->private_ip || n.hostname != o->hostname)) {
      n.private_ip = o->private_ip;
      n.hostname = o->hostname;
      w.dirty[i] = true;
    }
    switch (o->state) {
      case InstanceState::kPending:
        break;
      case InstanceState::kRunning:
        if (n.recovery) break;  // Recover() decides
        if (w.snap.lifecycle_by_agent && n.status == is::kPending) {
          if (n.lifecycle_state == model::lifecycle_state::kFailed) {
            FailNode(w, i, n.lifecycle_message);
            break;
          }
          if (n.lifecycle_state != model::lifecycle_state::kSucceeded) {
            if (n.lifecycle_state.empty() &&
                w.now - n.launch_time > w.snap.agent_start_timeout) {
              FailNode(w, i,
                       absl::StrCat("The instance booted but its node agent did not start the "
                                    "lifecycle scripts within ",
                                    std::chrono::duration_cast<std::chrono::seconds>(
                                        w.snap.agent_start_timeout)
                                        .count(),
                                    " seconds."));
            }
            break;
          }
        }
        if (n.status == is::kPending) {
          w.setStatus(i, is::kRunning);
          w.event("Instance", "Info",
                  absl::StrCat("Instance ", n.instance_id, " is running in group ", n.group),
                  n.group, n.instance_id,
                  json{{"Instance", {{"NodeLogicalId", n.logical_id}}}});
        }
        break;
      case InstanceState::kFailed:
        if (n.recovery) break;  // Recover() decides (a hard reboot brings it back)
        if (w.snap.lifecycle_by_agent && n.status == is::kRunning) break;  // Detect() decides
        if (n.status != is::kFailure) FailNode(w, i, o->message);
        break;
      case InstanceState::kTerminating:
        w.setStatus(i, is::kShuttingDown);
        break;
    }
  }
  // Instances the provider runs that no record knows (e.g. a record erased before the
  // provider finished): terminate them.
  std::map<std::string, bool> known;
  for (const auto& n : w.nodes) known[n.instance_id] = true;
  for (const auto& o : w.snap.instances) {
    if (!known.count(o.instance_id) && o.state != InstanceState::kTerminating) {
      w.plan.terminations.push_back(o.instance_id);
    }
  }
}

bool IsLive(const model::Node& n) { return n.status != is::kShuttingDown; }

/// Carries out node recoveries (Node::recovery): reboots and replacements.
void Recover(Work& w) {
  std::map<std::string, const provider::InstanceObservation*> by_id;
  for (const auto& o : w.snap.instances) by_id[o.instance_id] = &o;
  const size_t count = w.nodes.size();  // replacements are appended
  for (size_t i = 0; i < count; ++i) {
    if (!w.nodes[i].recovery || !IsLive(w.nodes[i])) continue;
    const model::Node n = w.nodes[i];
    const Request& request = *n.recovery;
    const model::RecoveryProgress& progress = n.recovery_progress;
    const std::string& reason = request.reason;
    Action action = progress.reboot_instead ? Action::kReboot : request.action;
    auto it = by_id.find(n.instance_id);
    const provider::InstanceObservation* o = it == by_id.end() ? nullptr : it->second;
    if (action == Action::kReplace && !w.snap.controller_group.empty() &&
        n.group == w.snap.controller_group) {
      // As on HyperPod: a controller keeps its disk (slurmctld's state, accounting).
      action = Action::kReboot;
      w.nodes[i].recovery_progress.reboot_instead = true;
      w.dirty[i] = true;
      w.event("Instance", "Info",
              absl::StrCat("Instance ", n.instance_id, " runs the Slurm controller: it is "
                           "rebooted instead of replaced"),
              n.group, n.instance_id);
    }
    if (action == Action::kReplace) {
      model::Node r;
      r.cluster_id = n.cluster_id;
      r.instance_id = w.ids.instanceId();
      r.logical_id = n.logical_id;
      r.group = n.group;
      const model::InstanceGroup* g = w.cluster.group(n.group);
      r.instance_type = g ? g->instance_type : n.instance_type;
      r.status = is::kPending;
      r.message = absl::StrCat("Replacing instance ", n.instance_id,
                               reason.empty() ? "" : absl::StrCat(": ", reason));
      r.launch_time = w.now;
      // Same address and name (the provider confirms them once it runs): Slurm knows the
      // node by this name while the replacement boots.
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
                           ")", reason.empty() ? "" : absl::StrCat(": ", reason)),
              n.group, n.instance_id,
              json{{"Instance", {{"NodeLogicalId", n.logical_id}, {"Action", "Replace"}}}});
      EndRecovery(w.nodes[i]);
      w.shutDown(i, absl::StrCat("replaced by ", r.instance_id), request.hard);
      // Launched by Observe() on a later pass, once the predecessor is gone.
      w.nodes.push_back(std::move(r));
      w.dirty.push_back(true);
      w.expected.push_back(store::kMustNotExist);
      continue;
    }
    if (!progress.started_at) {
      if (!o) {
        EndRecovery(w.nodes[i]);
        FailNode(w, i, "The instance no longer exists and cannot be rebooted.");
        continue;
      }
      // A soft reboot needs a running system to ask; a power cycle does not.
      if (!request.hard && o->state != InstanceState::kRunning) continue;  // once it runs
      (request.hard ? w.plan.hard_reboots : w.plan.reboots).push_back(n.instance_id);
      // The boot it must leave: boot times are only as exact as the kernel's boot second,
      // so "later than the start" alone misses a reboot that takes under a second.
      model::RecoveryProgress& started = w.nodes[i].recovery_progress;
      started.boot_time_before =
          o->state == InstanceState::kRunning ? o->boot_time : SystemTime{};
      started.started_at = w.now;
      started.asked_at = w.now;
      w.nodes[i].recovered_at = w.now;
      w.nodes[i].marks.slurm_down_pending = true;
      w.setStatus(i, is::kPending,
                  absl::StrCat("Rebooting", reason.empty() ? "" : absl::StrCat(": ", reason)));
      w.dirty[i] = true;
      w.event("Instance", "Info",
              absl::StrCat("Rebooting instance ", n.instance_id,
                           reason.empty() ? "" : absl::StrCat(": ", reason)),
              n.group, n.instance_id,
              json{{"Instance", {{"NodeLogicalId", n.logical_id}, {"Action", "Reboot"}}}});
      continue;
    }
    const SystemTime started_at = *progress.started_at;
    const bool new_boot =
        o && o->state == InstanceState::kRunning &&
        (o->boot_time > started_at ||
         (progress.boot_time_before && o->boot_time != SystemTime{} &&
          std::abs(ToEpochSeconds(o->boot_time) - ToEpochSeconds(*progress.boot_time_before)) >
              0.005));
    if (new_boot) {
      EndRecovery(w.nodes[i]);
      w.setStatus(i, is::kRunning);
      w.dirty[i] = true;
      w.event("Instance", "Info", absl::StrCat("Instance ", n.instance_id, " rebooted"),
              n.group, n.instance_id);
    } else if (o && o->state == InstanceState::kRunning &&
               w.now - progress.asked_at.value_or(started_at) > std::chrono::seconds(30) &&
               w.now - started_at <= w.snap.reboot_timeout) {
      // Still up on its old boot: the request was lost (e.g. a restart between the commit
      // and the provider call) or the system ignored it (hung). Power-cycle it.
      w.plan.hard_reboots.push_back(n.instance_id);
      w.nodes[i].recovery_progress.asked_at = w.now;
      w.dirty[i] = true;
    } else if (w.now - started_at > w.snap.reboot_timeout) {
      EndRecovery(w.nodes[i]);
      w.dirty[i] = true;
      FailNode(w, i,
               absl::StrCat("The instance did not come back within ",
                            std::chrono::duration_cast<std::chrono::seconds>(
                                w.snap.reboot_timeout).count(),
                            " seconds of its reboot."));
    }
  }
}

// ---- node health (docs/resiliency.md) ----

constexpr const char* kActionReplace = "Action:Replace";
constexpr const char* kActionReboot = "Action:Reboot";
constexpr const char* kOurReasonPrefix = "Hyperfleet:";

int64_t Seconds(Duration d) { return std::chrono::duration_cast<std::chrono::seconds>(d).count(); }

/// sinfo's long state without its flags: "down*" → "down", "idle+drain" → "idle".
std::string BaseState(std::string_view state) {
  std::string base;
  for (char c : state) {
    if (c == '+' || c == '*' || c == '~' || c == '#' || c == '!' || c == '%' || c == '$' ||
        c == '@' || c == '^' || c == '-') {
      break;
    }
    base.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return base;
}

/// Slurm states in which a node takes no new work because someone marked it.
bool IsMarkedState(const std::string& base) {
  return base == "down" || base == "fail" || base == "failing" || base == "drain" ||
         base == "drained" || base == "draining";
}

const SlurmNodeState* SlurmNode(const Work& w, const std::string& hostname) {
  if (!w.snap.slurm_nodes || hostname.empty()) return nullptr;
  for (const auto& s : *w.snap.slurm_nodes) {
    if (s.name == hostname) return &s;
  }
  return nullptr;
}

/// What Detect() found wrong with a node.
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
    case Source::kSlurmAction: return std::nullopt;
  }
  return std::nullopt;
}

/// The failing checks of a health report, "check: message; ...".
std::string FailingChecks(const json& health, const char* severity) {
  std::string out;
  if (!health.contains("findings") || !health["findings"].is_array()) return out;
  for (const auto& f : health["findings"]) {
    if (!f.is_object() || f.value("severity", "") != severity) continue;
    absl::StrAppend(&out, out.empty() ? "" : "; ", f.value("check", std::string("?")), ": ",
                    f.value("message", std::string()));
  }
  return out;
}

/// The fault of node `n`, if any. Pure function of the snapshot.
/// When node `n`'s agent was last heard from, counting from its launch or last recovery,
/// from the control plane's start and from its instance's boot.
SystemTime LastHeard(const Work& w, const model::Node& n, const provider::InstanceObservation& o) {
  SystemTime last = std::max({n.launch_time, n.recovered_at,
                              w.snap.liveness_policy.listening_since, o.boot_time});
  auto it = w.snap.liveness.find(n.instance_id);
  if (it != w.snap.liveness.end()) last = std::max(last, it->second.last_heard);
  return last;
}

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
    if (it != w.snap.liveness.end() && it->second.health.is_object()) {
      const json& h = it->second.health;
      const double checked = h.value("checked_at", 0.0);
      if (FromEpochSeconds(checked) > since) {
        const std::string verdict = h.value("verdict", "");
        if (verdict == "hard_fault") {
          found = Finding{Source::kHardwareFault, Action::kReplace,
                          absl::StrCat("Health check: ", FailingChecks(h, "hard_fault")), false};
        } else if (verdict == "soft_fault") {
          found = Finding{Source::kSoftwareFault, Action::kReboot,
                          absl::StrCat("Health check: ", FailingChecks(h, "soft_fault")), false};
        }
      }
    }
  }
  // A user's request through Slurm (exact, case-sensitive reasons, as on HyperPod): acted on
  // once the node's jobs have ended (fail, not failing) or at once (down).
  if (const SlurmNodeState* s = SlurmNode(w, n.hostname)) {
    const std::string base = BaseState(s->state);
    // "fail" with CPUs still allocated is failing in all but name (22.05 shows a partly busy
    // node so): its jobs have not ended yet.
    if ((s->reason == kActionReplace || s->reason == kActionReboot) &&
        (base == "down" || (base == "fail" && s->alloc_cpus == 0)) && s->reason_time > since) {
      const bool replace = s->reason == kActionReplace;
      if (replace || !found || found->action != Action::kReplace) {
        found = Finding{Source::kSlurmAction, replace ? Action::kReplace : Action::kReboot,
                        absl::StrCat("Slurm node ", s->name, " was set ", base, " with reason \"",
                                     s->reason, "\""),
                        false};
      }
    }
  }
  return found;
}

/// NodeRecovery Automatic (the service model's default) rather than None.
bool AutomaticRecovery(const model::Cluster& c) {
  auto it = c.spec.find("NodeRecovery");
  return it == c.spec.end() || !it->is_string() || *it != "None";
}

/// Finds faulty nodes and starts their recovery (or only reports them, NodeRecovery None).
void Detect(Work& w) {
  std::map<std::string, const provider::InstanceObservation*> by_id;
  for (const auto& o : w.snap.instances) by_id[o.instance_id] = &o;
  if (w.cluster.status != cs::kInService && w.cluster.status != cs::kUpdating) {
    // Not yet (or no longer) in service: a running node that stopped fails, as before
    // monitoring (Observe() left these to this function).
    if (!w.snap.lifecycle_by_agent) return;
    for (size_t i = 0; i < w.nodes.size(); ++i) {
      const model::Node& n = w.nodes[i];
      if (n.status != is::kRunning || n.recovery) continue;
      auto it = by_id.find(n.instance_id);
      if (it == by_id.end()) {
        FailNode(w, i, "The instance is no longer reported by its provider.");
      } else if (it->second->state == InstanceState::kFailed) {
        FailNode(w, i, it->second->message);
      }
    }
    return;
  }
  const bool automatic = AutomaticRecovery(w.cluster);
  // Many nodes falling silent at once points at the control plane or the network (a
  // stalled host, a partition), not at that many hung nodes: then silence alone replaces
  // nothing (Kubernetes' node lifecycle controller reasons the same way). Dead nodes and
  // health reports are still acted on.
  int running = 0, silent = 0;
  for (const auto& n : w.nodes) {
    if (n.status != is::kRunning || n.recovery) continue;
    auto it = by_id.find(n.instance_id);
    if (it == by_id.end() || it->second->state != InstanceState::kRunning) continue;
    ++running;
    if (w.now - LastHeard(w, n, *it->second) > w.snap.liveness_policy.unresponsive_after) ++silent;
  }
  const bool mass_silence = silent >= 2 && 2 * silent > running;
  if (mass_silence) {
    w.plan.notice = absl::StrCat(silent, " of ", running, " running nodes have been silent for "
                                 "more than ", Seconds(w.snap.liveness_policy.unresponsive_after),
                                 " s: suspecting the control plane or the network, not the "
                                 "nodes; none is replaced for silence");
  }
  for (size_t i = 0; i < w.nodes.size(); ++i) {
    model::Node& n = w.nodes[i];
    if (!IsLive(n) || n.recovery) continue;
    auto it = by_id.find(n.instance_id);
    const provider::InstanceObservation* o = it == by_id.end() ? nullptr : it->second;
    const bool reported = n.fault && n.fault->kind != FaultKind::kReplacementFailed;
    if (n.status == is::kFailure && !reported) {
      // Retry a replacement whose lifecycle scripts failed (not under Continuous provisioning,
      // where Scale() replaces failed instances itself).
      if (n.marks.replacement_of.empty() || w.cluster.continuous()) continue;
      if (!n.fault) {
        const int attempt = n.marks.replace_attempt;
        Duration delay = w.snap.liveness_policy.retry_delay;
        for (int k = 1; k < attempt && delay < w.snap.liveness_policy.max_retry_delay; ++k) delay *= 2;
        delay = std::min(delay, w.snap.liveness_policy.max_retry_delay);
        n.fault = model::NodeFault{FaultKind::kReplacementFailed, n.message, w.now, w.now + delay};
        w.dirty[i] = true;
        w.event("Instance", "Warn",
                absl::StrCat("Replacement instance ", n.instance_id, " failed (attempt ", attempt,
                             "): ", n.message, " It is replaced again in ", Seconds(delay), " s."),
                n.group, n.instance_id);
        continue;
      }
      if (w.now >= n.fault->retry_at) {
        n.marks.replace_attempt += 1;
        n.recovery = Request{Action::kReplace,
                             absl::StrCat("retrying a failed replacement: ", n.fault->message),
                             w.now, /*hard=*/false, Source::kReplacementFailed};
        n.fault.reset();
        w.dirty[i] = true;
      }
      continue;
    }
    if (n.status != is::kRunning && !(n.status == is::kFailure && n.fault)) continue;
    const std::optional<Finding> f = FindFault(w, n, o, mass_silence);
    if (!f) {
      if (n.fault) {
        // A reported fault that went away by itself (NodeRecovery None).
        w.event("Instance", "Info",
                absl::StrCat("Instance ", n.instance_id, " is healthy again (was: ",
                             n.fault->message, ")"),
                n.group, n.instance_id);
        n.fault.reset();
        w.setStatus(i, is::kRunning);
        w.dirty[i] = true;
      }
      continue;
    }
    Action action = f->action;
    const bool controller = !w.snap.controller_group.empty() && n.group == w.snap.controller_group;
    std::string note;
    if (action == Action::kReplace && controller) {
      action = Action::kReboot;  // as on HyperPod: controller nodes are not replaced
      note = " Controller nodes are rebooted, not replaced.";
    }
    const std::string where =
        absl::StrCat("instance ", n.instance_id, " (group ", n.group,
                     n.hostname.empty() ? "" : absl::StrCat(", node ", n.hostname), ")");
    const std::string& kind = model::ToString(f->source);  // "Requested" for Slurm's
    const std::optional<FaultKind> fault = FaultOf(f->source);
    if (!automatic && fault) {
      if (n.fault && n.fault->kind == *fault) continue;  // reported
      n.fault = model::NodeFault{*fault, f->message, w.now};
      w.dirty[i] = true;
      w.event("Instance", "Warn",
              absl::StrCat(kind, " on ", where, ": ", f->message,
                           " NodeRecovery is None: the node is only reported."),
              n.group, n.instance_id,
              json{{"Instance", {{"NodeLogicalId", n.logical_id}, {"FailureMessage", f->message}}}});
      if (*fault == FaultKind::kDead || *fault == FaultKind::kUnresponsive) {
        w.setStatus(i, is::kFailure, f->message);
      } else {
        w.setStatus(i, is::kRunning, f->message);
      }
      continue;
    }
    n.fault.reset();
    n.recovery = Request{action, f->message, w.now, f->hard, f->source};
    w.dirty[i] = true;
    w.event("Instance", fault ? "Warn" : "Info",
            absl::StrCat(kind, " on ", where, ": ", f->message, " ",
                         action == Action::kReplace ? "Replacing" : "Rebooting", " it.", note),
            n.group, n.instance_id,
            json{{"Instance",
                  {{"NodeLogicalId", n.logical_id}, {"Action", model::ToString(action)}}}});
  }
}

/// The Slurm node states wanted now: DOWN with a "Hyperfleet: ..." reason while a node is
/// faulty or being recovered, resume once its (new) instance is up.
/// What a node being recovered or faulty says in its Slurm DOWN reason.
std::string RecoveryText(const model::Node& n) {
  if (n.recovery) {
    const bool reboot =
        n.recovery_progress.reboot_instead || n.recovery->action == Action::kReboot;
    return absl::StrCat(reboot ? "rebooting" : "replacing", ": ", n.recovery->reason);
  }
  if (n.fault) return n.fault->message;
  return n.message.empty() ? std::string("recovered; its jobs must end") : n.message;
}

/// Whether Slurm's `reason` is one of the DOWN reasons the planner set (`issued`); sinfo
/// may shorten long reasons.
bool IssuedReason(const std::vector<std::string>& issued, const std::string& reason) {
  if (reason.empty()) return false;
  for (const std::string& text : issued) {
    if (text == reason || (reason.size() >= 20 && absl::StartsWith(text, reason))) return true;
  }
  return false;
}

void MarkSlurmNodes(Work& w) {
  if (!w.snap.slurm_nodes) return;
  std::set<std::string> replaced;  // instance ids with a replacement
  for (const auto& n : w.nodes) {
    if (!n.marks.replacement_of.empty()) replaced.insert(n.marks.replacement_of);
  }
  for (const auto& s : *w.snap.slurm_nodes) {
    const std::string base = BaseState(s.state);
    std::string down_reason;
    std::optional<size_t> cur;
    std::vector<size_t> live;  // this name's records that are not shutting down
    for (size_t i = 0; i < w.nodes.size(); ++i) {
      model::Node& n = w.nodes[i];
      if (n.hostname != s.name) continue;
      if (n.status != is::kShuttingDown) live.push_back(i);
      if (n.status != is::kShuttingDown && n.marks.slurm_down_pending) {
        if (base == "down" || base == "fail") {
          n.marks.slurm_down_pending = false;  // Slurm has seen it: resume when ready
          w.dirty[i] = true;
        } else {
          down_reason = RecoveryText(n);
          continue;
        }
      }
      if (n.status == is::kShuttingDown) {
        if (replaced.count(n.instance_id) && down_reason.empty()) {
          down_reason = absl::StrCat("replacing instance ", n.instance_id);
        }
      } else if (n.recovery || n.fault || n.status == is::kFailure) {
        down_reason = RecoveryText(n);
      } else if (n.status == is::kRunning ||
                 (n.status == is::kPending && !n.lifecycle_state.empty() &&
                  n.lifecycle_state != model::lifecycle_state::kFailed)) {
        if (!cur || n.launch_time > w.nodes[*cur].launch_time) cur = i;
      } else if (n.status == is::kPending && !n.marks.replacement_of.empty()) {
        down_reason = n.message;  // a replacement that has not booted yet
      }
    }
    if (cur) {
      model::Node& c = w.nodes[*cur];
      if (!IsMarkedState(base)) {
        if (!c.marks.slurm_down_reasons.empty()) {
          c.marks.slurm_down_reasons.clear();  // back in service
          w.dirty[*cur] = true;
        }
        continue;
      }
      // Only marks the planner set itself, a user's Action:* request that this instance (or
      // recovery) already answered, and Slurm's own complaint about a reboot we asked for.
      const bool ours = IssuedReason(c.marks.slurm_down_reasons, s.reason);
      const bool old_request = (s.reason == kActionReplace || s.reason == kActionReboot) &&
                               s.reason_time <= std::max(c.launch_time, c.recovered_at);
      const bool our_reboot = s.reason == "Node unexpectedly rebooted" &&
                              c.recovered_at != SystemTime{} &&
                              s.reason_time >= c.recovered_at - std::chrono::seconds(1);
      if (ours || old_request || our_reboot) {
        w.plan.slurm_marks.push_back({s.name, "resume", s.reason});
      }
    } else if (!down_reason.empty() && base != "down" && base != "fail") {
      std::string reason = absl::StrCat(kOurReasonPrefix, " ", down_reason);
      // Slurm keeps reasons short in its listings; the full text is in the events.
      if (reason.size() > 200) reason = reason.substr(0, 197) + "...";
      w.plan.slurm_marks.push_back({s.name, "down", reason});
      // Remembered on the records that will answer for this name, so that the node is
      // resumed from this mark (and only from marks like it) once it is back.
      for (size_t i : live) {
        std::vector<std::string>& issued = w.nodes[i].marks.slurm_down_reasons;
        if (IssuedReason(issued, reason)) continue;
        issued.push_back(reason);
        while (issued.size() > 4) issued.erase(issued.begin());
        w.dirty[i] = true;
      }
    }
  }
}

/// Orders surplus instances for removal: failed, then pending, then newest running.
int RemovalRank(const model::Node& n) {
  if (n.status == is::kFailure) return 0;
  if (n.status == is::kPending) return 1;
  return 2;
}

/// Brings each group's live count to its target (active transitions).
void Scale(Work& w) {
  const bool continuous = w.cluster.continuous();
  for (const auto& name : w.cluster.groups_deleting) {
    for (size_t i = 0; i < w.nodes.size(); ++i) {
      if (w.nodes[i].group == name) w.shutDown(i, "its instance group is being deleted");
    }
  }
  for (const auto& g : w.cluster.groups) {
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
      if (!continuous && w.cluster.status == cs::kFailed) continue;
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
}

/// The first failed instance of the declared groups, if any.
const model::Node* FirstFailure(const Work& w) {
  for (const auto& n : w.nodes) {
    if (n.status == is::kFailure && w.cluster.group(n.group)) return &n;
  }
  return nullptr;
}

bool AllGroupsReady(const Work& w) {
  for (const auto& g : w.cluster.groups) {
    int running = 0;
    for (const auto& n : w.nodes) {
      if (n.group == g.name && n.status == is::kRunning) ++running;
    }
    if (running != g.target_count) return false;
  }
  return true;
}

/// Continuous provisioning: every instance's first attempt has ended (Running, or failed and
/// being retried), so the cluster is usable while retries go on.
bool FirstAttemptsDone(const Work& w) {
  if (!w.cluster.groups_deleting.empty()) return false;
  for (const auto& n : w.nodes) {
    if (n.status == is::kPending && !IsRetry(n)) return false;
  }
  return true;
}

bool InFlight(const Work& w) {
  for (const auto& n : w.nodes) {
    if (n.status == is::kPending || n.status == is::kShuttingDown) return true;
  }
  return !w.plan.launches.empty() || !w.plan.terminations.empty() ||
         !w.cluster.groups_deleting.empty();
}

void SetClusterStatus(Work& w, const char* status, const std::string& failure = "") {
  if (w.cluster.status == status) return;
  w.cluster.status = status;
  if (!failure.empty()) w.cluster.failure_message = failure;
  const char* level = w.cluster.status == cs::kFailed ? "Error" : "Info";
  json meta;
  if (!failure.empty()) meta = json{{"Cluster", {{"FailureMessage", failure}}}};
  w.event("Cluster", level,
          absl::StrCat("Cluster ", w.cluster.name, " is ", status,
                       failure.empty() ? "" : absl::StrCat(": ", failure)),
          "", "", meta);
}

/// Rolls a failed update back: groups shrink to the instances that run.
void RollBack(Work& w, const model::Node& failed) {
  const std::string why =
      absl::StrCat("Instance ", failed.instance_id, " in group ", failed.group,
                   " failed: ", failed.message);
  w.cluster.failure_message = why;
  for (auto& g : w.cluster.groups) {
    int keep = 0;
    for (const auto& n : w.nodes) {
      if (n.group == g.name && n.status == is::kRunning) ++keep;
    }
    if (keep < g.target_count) {
      w.event("InstanceGroup", "Error",
              absl::StrCat("Scaling group ", g.name, " to ", g.target_count,
                           " failed; rolled back to ", keep, ": ", why),
              g.name, "",
              json{{"InstanceGroupScaling",
                    {{"InstanceCount", keep}, {"TargetCount", g.target_count},
                     {"FailureMessage", why}}}});
      g.target_count = keep;
      g.spec["InstanceCount"] = keep;
    }
  }
  SetClusterStatus(w, cs::kRollingBack);
}

void Finish(Work& w) {
  // Erase records of instances the provider no longer has.
  std::map<std::string, bool> reported;
  for (const auto& o : w.snap.instances) reported[o.instance_id] = true;
  std::vector<model::Node> kept;
  for (size_t i = 0; i < w.nodes.size(); ++i) {
    const auto& n = w.nodes[i];
    if (n.status == is::kShuttingDown && !reported.count(n.instance_id) &&
        w.expected[i] != store::kMustNotExist) {
      bool asked_now = std::find(w.plan.terminations.begin(), w.plan.terminations.end(),
                                 n.instance_id) != w.plan.terminations.end();
      if (!asked_now) {
        w.plan.writes.nodes.push_back({n, w.expected[i], /*erase=*/true});
        w.event("Instance", "Info", absl::StrCat("Instance ", n.instance_id, " terminated"),
                n.group, n.instance_id);
        continue;
      }
    }
    if (w.dirty[i]) w.plan.writes.nodes.push_back({n, w.expected[i], false});
    kept.push_back(n);
  }
  w.nodes = std::move(kept);
}

}  // namespace

ClusterPlan PlanCluster(const ClusterSnapshot& snapshot, SystemTime now, IdSource& ids) {
  Work w(snapshot, now, ids);
  Observe(w);

  if (w.cluster.status == cs::kDeleting) {
    for (size_t i = 0; i < w.nodes.size(); ++i) w.shutDown(i, "the cluster is being deleted");
    Finish(w);
    if (w.nodes.empty() && snapshot.instances.empty()) {
      w.plan.writes.events.clear();  // erased with the cluster, as are its node records
      w.plan.writes.nodes.clear();
      w.plan.writes.clusters.push_back({w.cluster, snapshot.cluster.revision, /*erase=*/true});
    } else {
      w.plan.writes.clusters.push_back({w.cluster, snapshot.cluster.revision, false});
    }
    return std::move(w.plan);
  }

  // Finished group deletions leave the cluster: a group is gone once no record names it
  // (records stay until the provider no longer reports their instance).
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

  const model::Node* failure = FirstFailure(w);
  const bool continuous = w.cluster.continuous();
  if (failure && !continuous && w.cluster.status == cs::kCreating) {
    // HyperPod's wording (DescribeCluster.FailureMessage of a failed create).
    SetClusterStatus(w, cs::kFailed,
                     absl::StrCat("Instance ", failure->instance_id, " (instance group ",
                                  failure->group,
                                  ") failed to provision with the following error: \"",
                                  failure->message,
                                  "\" Note that multiple instances may be impacted."));
  } else if (failure && !continuous && w.cluster.status == cs::kUpdating) {
    RollBack(w, *failure);
  }
  Detect(w);
  Recover(w);
  if (w.cluster.status != cs::kFailed) Scale(w);
  MarkSlurmNodes(w);
  Finish(w);
  if (w.snap.lifecycle_by_agent && w.cluster.status != cs::kDeleting) {
    for (const auto& n : w.nodes) {
      if (n.status == is::kRunning || (n.status == is::kFailure && n.fault)) {
        w.plan.watch_liveness = true;
        break;
      }
    }
  }

  const bool in_flight = InFlight(w);
  if (w.cluster.status == cs::kCreating || w.cluster.status == cs::kUpdating ||
      w.cluster.status == cs::kRollingBack) {
    if ((!in_flight && AllGroupsReady(w)) || (continuous && FirstAttemptsDone(w))) {
      SetClusterStatus(w, cs::kInService);
    }
  }
  if (w.cluster.status != snapshot.cluster.status ||
      w.cluster.failure_message != snapshot.cluster.failure_message ||
      w.cluster.groups_deleting != snapshot.cluster.groups_deleting ||
      w.cluster.groups.size() != snapshot.cluster.groups.size() ||
      !std::equal(w.cluster.groups.begin(), w.cluster.groups.end(),
                  snapshot.cluster.groups.begin(),
                  [](const auto& a, const auto& b) { return a.target_count == b.target_count; })) {
    w.plan.writes.clusters.push_back({w.cluster, snapshot.cluster.revision, false});
  } else if (!w.plan.writes.empty()) {
    // Node writes are fenced by the cluster's revision: an API update in between makes
    // this plan stale, and the commit fails instead of acting on an old declaration.
    w.plan.writes.clusters.push_back({w.cluster, snapshot.cluster.revision, false});
  }
  w.plan.settled = !in_flight && (w.cluster.status == cs::kInService ||
                                  w.cluster.status == cs::kFailed);
  return std::move(w.plan);
}

std::optional<Duration> RequeueAfter(const ClusterPlan& plan, Duration active, Duration liveness) {
  if (!plan.settled) return active;
  if (plan.watch_liveness) return liveness;
  return std::nullopt;
}

}  // namespace hf::control
