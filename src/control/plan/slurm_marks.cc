// MarkSlurmNodes: the Slurm node states the control plane wants now (docs/slurm.md,
// docs/resiliency.md): DOWN with a "Hyperfleet: ..." reason while a node is faulty or being
// recovered, resume once its (new) instance is up. Only marks the planner set are lifted.
#include <algorithm>
#include <cctype>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "control/plan/work.h"

namespace hf::control::plan {
namespace {

constexpr const char* kOurReasonPrefix = "Hyperfleet:";

/// Slurm states in which a node takes no new work because someone marked it.
bool IsMarkedState(const std::string& base) {
  return base == "down" || base == "fail" || base == "failing" || base == "drain" ||
         base == "drained" || base == "draining";
}

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

/// The records answering for one Slurm node name, as MarkSlurmNodes() sees them.
struct NameView {
  std::string down_reason;   ///< why the name must be DOWN ("" when it need not)
  std::optional<size_t> up;  ///< the newest record that is up (or booting its scripts)
  std::vector<size_t> live;  ///< the name's records that are not shutting down
};

/// Looks at the records `records` of Slurm node `s` (whose state without flags is `base`);
/// clears a pending DOWN that Slurm has now shown.
NameView View(Work& w, const std::vector<size_t>& records, const std::string& base,
              const std::set<std::string>& replaced) {
  NameView v;
  for (size_t i : records) {
    model::Node& n = w.nodes[i];
    if (IsLive(n)) v.live.push_back(i);
    if (IsLive(n) && n.marks.slurm_down_pending) {
      if (base == "down" || base == "fail") {
        n.marks.slurm_down_pending = false;  // Slurm has seen it: resume when ready
        w.dirty[i] = true;
      } else {
        v.down_reason = RecoveryText(n);
        continue;
      }
    }
    if (n.status == is::kShuttingDown) {
      if (replaced.count(n.instance_id) && v.down_reason.empty()) {
        v.down_reason = absl::StrCat("replacing instance ", n.instance_id);
      }
    } else if (n.recovery || n.fault || n.status == is::kFailure) {
      v.down_reason = RecoveryText(n);
    } else if (n.status == is::kRunning ||
               (n.status == is::kPending && !n.lifecycle_state.empty() &&
                n.lifecycle_state != model::lifecycle_state::kFailed)) {
      if (!v.up || n.launch_time > w.nodes[*v.up].launch_time) v.up = i;
    } else if (n.status == is::kPending && IsReplacement(n)) {
      v.down_reason = n.message;  // a replacement that has not booted yet
    }
  }
  return v;
}

/// Node `up` answers for Slurm node `s`, which is marked (`base`): resumes it if the mark is
/// one the planner set, a user's Action:* request this instance (or recovery) already
/// answered, or Slurm's own complaint about a reboot we asked for.
void Resume(Work& w, size_t up, const SlurmNodeState& s, const std::string& base) {
  model::Node& c = w.nodes[up];
  if (!IsMarkedState(base)) {
    if (!c.marks.slurm_down_reasons.empty()) {
      c.marks.slurm_down_reasons.clear();  // back in service
      w.dirty[up] = true;
    }
    return;
  }
  const bool ours = IssuedReason(c.marks.slurm_down_reasons, s.reason);
  const bool old_request = (s.reason == kActionReplace || s.reason == kActionReboot) &&
                           s.reason_time <= std::max(c.launch_time, c.recovered_at);
  const bool our_reboot = s.reason == "Node unexpectedly rebooted" &&
                          c.recovered_at != SystemTime{} &&
                          s.reason_time >= c.recovered_at - std::chrono::seconds(1);
  if (ours || old_request || our_reboot) w.plan.slurm_marks.push_back({s.name, "resume", s.reason});
}

/// Marks Slurm node `s` DOWN for `down_reason`, remembered on the records that will answer
/// for its name (`live`) so that the node is resumed from this mark (and only from marks like
/// it) once it is back.
void MarkDown(Work& w, const SlurmNodeState& s, const std::string& down_reason,
              const std::vector<size_t>& live) {
  std::string reason = absl::StrCat(kOurReasonPrefix, " ", down_reason);
  // Slurm keeps reasons short in its listings; the full text is in the events.
  if (reason.size() > 200) reason = reason.substr(0, 197) + "...";
  w.plan.slurm_marks.push_back({s.name, "down", reason});
  for (size_t i : live) {
    std::vector<std::string>& issued = w.nodes[i].marks.slurm_down_reasons;
    if (IssuedReason(issued, reason)) continue;
    issued.push_back(reason);
    while (issued.size() > 4) issued.erase(issued.begin());
    w.dirty[i] = true;
  }
}

}  // namespace

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

const SlurmNodeState* SlurmNode(const Work& w, const std::string& hostname) {
  if (hostname.empty()) return nullptr;
  return w.slurmNode(hostname);
}

void MarkSlurmNodes(Work& w) {
  if (!w.snap.slurm_nodes) return;
  // Computed once: the records of each name, in record order, and the replaced instances.
  std::map<std::string, std::vector<size_t>> by_name;
  std::set<std::string> replaced;
  for (size_t i = 0; i < w.nodes.size(); ++i) {
    by_name[w.nodes[i].hostname].push_back(i);
    if (IsReplacement(w.nodes[i])) replaced.insert(w.nodes[i].marks.replacement_of);
  }
  static const std::vector<size_t> kNone;
  for (const auto& s : *w.snap.slurm_nodes) {
    const std::string base = BaseState(s.state);
    auto it = by_name.find(s.name);
    const NameView v = View(w, it == by_name.end() ? kNone : it->second, base, replaced);
    if (v.up) {
      Resume(w, *v.up, s, base);
    } else if (!v.down_reason.empty() && base != "down" && base != "fail") {
      MarkDown(w, s, v.down_reason, v.live);
    }
  }
}

}  // namespace hf::control::plan
