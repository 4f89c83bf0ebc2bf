#include "hyperfleet/pool/machine_pool.h"

#include <algorithm>
#include <array>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "hyperfleet/common/strings.h"

namespace hf::pool {
namespace {

constexpr std::array<std::pair<MachineState, std::string_view>, 9> kStateNames = {{
    {MachineState::kFree, "free"},
    {MachineState::kSpareProvisioning, "spare-provisioning"},
    {MachineState::kSpareReady, "spare-ready"},
    {MachineState::kSpareChecking, "spare-checking"},
    {MachineState::kInUse, "in-use"},
    {MachineState::kRebooting, "rebooting"},
    {MachineState::kRepairing, "repairing"},
    {MachineState::kChecking, "checking"},
    {MachineState::kQuarantined, "quarantined"},
}};

constexpr std::string_view ReportName(Report report) {
  switch (report) {
    case Report::kFaultRebootInPlace: return "fault (reboot in place)";
    case Report::kFaultReboot: return "fault (reboot)";
    case Report::kFaultRepair: return "fault (repair)";
    case Report::kRebooted: return "rebooted";
    case Report::kRepaired: return "repaired";
    case Report::kProvisioned: return "provisioned";
    case Report::kCheckPassed: return "check passed";
    case Report::kCheckFailed: return "check failed";
    case Report::kReleased: return "released";
    case Report::kOperatorReturn: return "operator return";
  }
  return "?";
}

/// Failures within the lemon window ending at `now`.
int RecentFailures(const Machine& m, const PoolPolicy& policy, SystemTime now) {
  return static_cast<int>(std::count_if(m.failures.begin(), m.failures.end(), [&](SystemTime t) {
    return t > now - policy.lemon_window;
  }));
}

/// `m` in `state` from `now` on.
Machine Moved(Machine m, MachineState state, SystemTime now) {
  m.state = state;
  m.since = now;
  if (state != MachineState::kInUse && state != MachineState::kRebooting) {
    m.cluster.clear();
    m.node.clear();
  }
  if (state == MachineState::kFree || state == MachineState::kInUse) m.reason.clear();
  return m;
}

/// Free machines of `type`, healthiest first (fewest recent failures, then id).
std::vector<const Machine*> FreeByHealth(std::span<const Machine> machines,
                                         std::string_view type, const PoolPolicy& policy,
                                         SystemTime now) {
  std::vector<std::pair<int, const Machine*>> free;
  for (const Machine& m : machines) {
    if (m.instance_type == type && m.state == MachineState::kFree) {
      free.emplace_back(RecentFailures(m, policy, now), &m);
    }
  }
  std::sort(free.begin(), free.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first, a.second->id) < std::tie(b.first, b.second->id);
  });
  std::vector<const Machine*> out;
  out.reserve(free.size());
  for (const auto& [failures, m] : free) out.push_back(m);
  return out;
}

/// Ready spares of `type`: the most recently checked first, then by id.
std::vector<const Machine*> ReadySpares(std::span<const Machine> machines,
                                        std::string_view type) {
  std::vector<const Machine*> out;
  for (const Machine& m : machines) {
    if (m.instance_type == type && m.state == MachineState::kSpareReady) out.push_back(&m);
  }
  std::sort(out.begin(), out.end(), [](const Machine* a, const Machine* b) {
    SystemTime ca = a->last_check.value_or(SystemTime{});
    SystemTime cb = b->last_check.value_or(SystemTime{});
    if (ca != cb) return ca > cb;
    return a->id < b->id;
  });
  return out;
}

std::string Plural(int n, std::string_view one, std::string_view many) {
  return absl::StrCat(n, " ", AbslView(n == 1 ? one : many));
}

Shortfall MakeShortfall(const Capacity& c, std::string_view type, int requested) {
  Shortfall s{std::string(type), requested, c.spares_ready, c.free, ""};
  s.message = absl::StrCat(
      "Insufficient capacity for ", AbslView(type), ": ", requested, " requested, ",
      Plural(c.spares_ready, "hot spare", "hot spares"), " ready and ",
      Plural(c.free, "free machine", "free machines"), " (", c.in_use, " in use, ",
      c.spares_provisioning, " spares being prepared, ", c.out_of_service,
      " in reboot or repair, ", c.quarantined, " quarantined)");
  return s;
}

/// A fault or failed check on `m`: record it; quarantine by the lemon rule, else `remedy`.
Transition Fault(const Machine& m, MachineState remedy, bool keep_node, const PoolPolicy& policy,
                 SystemTime now, std::string_view reason) {
  Machine after = m;
  after.failures.push_back(now);
  int recent = RecentFailures(after, policy, now);
  bool had_node = !m.node.empty();
  Transition t;
  if (policy.lemon_failures > 0 && recent >= policy.lemon_failures) {
    t.machine = Moved(std::move(after), MachineState::kQuarantined, now);
    t.machine.reason = absl::StrCat("lemon: ", recent, " failures within ",
                                    std::chrono::duration_cast<std::chrono::hours>(
                                        policy.lemon_window).count(),
                                    " h", reason.empty() ? "" : "; last: ", AbslView(reason));
    t.quarantined = true;
    t.replace_node = had_node;
    return t;
  }
  t.machine = Moved(std::move(after), remedy, now);
  if (!keep_node) {
    t.machine.cluster.clear();
    t.machine.node.clear();
  }
  t.machine.reason = std::string(reason);
  t.replace_node = had_node && !keep_node;
  return t;
}

Status NotApplicable(const Machine& m, Report report) {
  return absl::FailedPreconditionError(
      absl::StrCat("machine ", m.id, " is ", AbslView(MachineStateName(m.state)),
                   ": cannot apply ", AbslView(ReportName(report))));
}

/// The machine back from reboot or repair: through the return check, or straight to free.
Machine Returned(const Machine& m, const PoolPolicy& policy, SystemTime now) {
  if (!policy.return_check) return Moved(m, MachineState::kFree, now);
  return Moved(m, MachineState::kChecking, now);
}

void DropOldFailures(Machine& m, const PoolPolicy& policy, SystemTime now) {
  std::erase_if(m.failures, [&](SystemTime t) { return t <= now - policy.lemon_window; });
}

}  // namespace

std::string_view MachineStateName(MachineState state) {
  for (const auto& [s, name] : kStateNames) {
    if (s == state) return name;
  }
  return "?";
}

std::optional<MachineState> ParseMachineState(std::string_view name) {
  for (const auto& [s, n] : kStateNames) {
    if (n == name) return s;
  }
  return std::nullopt;
}

Capacity CountCapacity(std::span<const Machine> machines, std::string_view instance_type) {
  Capacity c;
  for (const Machine& m : machines) {
    if (m.instance_type != instance_type) continue;
    ++c.total;
    switch (m.state) {
      case MachineState::kFree: ++c.free; break;
      case MachineState::kSpareReady: ++c.spares_ready; break;
      case MachineState::kSpareProvisioning:
      case MachineState::kSpareChecking: ++c.spares_provisioning; break;
      case MachineState::kInUse: ++c.in_use; break;
      case MachineState::kRebooting:
      case MachineState::kRepairing:
      case MachineState::kChecking: ++c.out_of_service; break;
      case MachineState::kQuarantined: ++c.quarantined; break;
    }
  }
  return c;
}

Allocation Allocate(std::span<const Machine> machines, const LaunchRequest& request,
                    const PoolPolicy& policy, SystemTime now) {
  std::vector<const Machine*> spares = ReadySpares(machines, request.instance_type);
  std::vector<const Machine*> free = FreeByHealth(machines, request.instance_type, policy, now);
  Allocation out;
  const int requested = static_cast<int>(request.nodes.size());
  if (spares.size() + free.size() < request.nodes.size()) {
    out.shortfall = MakeShortfall(CountCapacity(machines, request.instance_type),
                                  request.instance_type, requested);
    if (request.all_or_nothing) return out;
  }
  size_t next_spare = 0, next_free = 0;
  for (const std::string& node : request.nodes) {
    const Machine* m = nullptr;
    bool from_spare = next_spare < spares.size();
    if (from_spare) {
      m = spares[next_spare++];
    } else if (next_free < free.size()) {
      m = free[next_free++];
    } else {
      break;
    }
    Machine after = Moved(*m, MachineState::kInUse, now);
    after.cluster = request.cluster;
    after.node = node;
    after.last_check.reset();
    out.grants.push_back({std::move(after), from_spare});
  }
  return out;
}

std::vector<SpareStep> PlanSpares(std::span<const Machine> machines, const PoolPolicy& policy,
                                  SystemTime now) {
  std::vector<SpareStep> steps;
  for (const auto& [type, target] : policy.spare_target) {
    Capacity c = CountCapacity(machines, type);
    int have = c.spares_ready + c.spares_provisioning;
    std::vector<const Machine*> ready = ReadySpares(machines, type);
    std::vector<const Machine*> retired;
    if (have > target) {
      // Retire the longest unchecked ready spares (ReadySpares lists the freshest first).
      int excess = std::min(have - target, static_cast<int>(ready.size()));
      retired.assign(ready.end() - excess, ready.end());
      ready.resize(ready.size() - excess);
    }
    std::vector<SpareStep> type_steps;
    if (have < target) {
      std::vector<const Machine*> free = FreeByHealth(machines, type, policy, now);
      size_t n = std::min(free.size(), static_cast<size_t>(target - have));
      for (size_t i = 0; i < n; ++i) {
        type_steps.push_back({SpareStep::Kind::kProvision,
                              Moved(*free[i], MachineState::kSpareProvisioning, now)});
      }
    }
    for (const Machine* m : ready) {
      if (!m->last_check || now - *m->last_check >= policy.spare_check_interval) {
        type_steps.push_back({SpareStep::Kind::kCheck,
                              Moved(*m, MachineState::kSpareChecking, now)});
      }
    }
    for (const Machine* m : retired) {
      Machine after = Moved(*m, MachineState::kFree, now);
      after.last_check.reset();
      type_steps.push_back({SpareStep::Kind::kRetire, std::move(after)});
    }
    std::sort(type_steps.begin(), type_steps.end(), [](const SpareStep& a, const SpareStep& b) {
      return std::tie(a.kind, a.machine.id) < std::tie(b.kind, b.machine.id);
    });
    steps.insert(steps.end(), type_steps.begin(), type_steps.end());
  }
  return steps;
}

StatusOr<Transition> Apply(const Machine& machine, Report report, const PoolPolicy& policy,
                           SystemTime now, std::string_view reason) {
  using S = MachineState;
  const S s = machine.state;
  const bool holds_node = s == S::kInUse;
  const bool is_spare = s == S::kSpareReady || s == S::kSpareChecking;
  StatusOr<Transition> out = NotApplicable(machine, report);
  switch (report) {
    case Report::kFaultRebootInPlace:
      if (holds_node) out = Fault(machine, S::kRebooting, true, policy, now, reason);
      break;
    case Report::kFaultReboot:
    case Report::kFaultRepair:
      if (holds_node || is_spare || s == S::kFree || s == S::kSpareProvisioning) {
        S remedy = report == Report::kFaultReboot ? S::kRebooting : S::kRepairing;
        out = Fault(machine, remedy, false, policy, now, reason);
      }
      break;
    case Report::kRebooted:
      if (s == S::kRebooting && !machine.node.empty()) {
        out = Transition{Moved(machine, S::kInUse, now)};
      } else if (s == S::kRebooting) {
        out = Transition{Returned(machine, policy, now)};
      }
      break;
    case Report::kRepaired:
      if (s == S::kRepairing) out = Transition{Returned(machine, policy, now)};
      break;
    case Report::kProvisioned:
      if (s == S::kSpareProvisioning) {
        Transition t{Moved(machine, S::kSpareReady, now)};
        t.machine.last_check = now;
        out = std::move(t);
      }
      break;
    case Report::kCheckPassed:
      if (s == S::kSpareChecking) {
        Transition t{Moved(machine, S::kSpareReady, now)};
        t.machine.last_check = now;
        out = std::move(t);
      } else if (s == S::kChecking) {
        out = Transition{Moved(machine, S::kFree, now)};
      }
      break;
    case Report::kCheckFailed:
      if (s == S::kSpareChecking || s == S::kChecking || s == S::kSpareProvisioning) {
        out = Fault(machine, S::kRepairing, false, policy, now, reason);
      }
      break;
    case Report::kReleased:
      if (holds_node || s == S::kSpareReady || s == S::kFree) {
        Transition t{Moved(machine, S::kFree, now)};
        t.machine.last_check.reset();
        out = std::move(t);
      } else if (s == S::kRebooting) {
        // Its node was deleted during an in-place reboot: the reboot ends in the return check.
        Transition t{machine};
        t.machine.cluster.clear();
        t.machine.node.clear();
        out = std::move(t);
      }
      break;
    case Report::kOperatorReturn:
      if (s == S::kQuarantined) {
        Transition t{Returned(machine, policy, now)};
        if (t.machine.state == S::kChecking) {
          t.machine.reason = reason.empty() ? "returned by an operator" : std::string(reason);
        }
        out = std::move(t);
      }
      break;
  }
  if (out.ok()) DropOldFailures(out->machine, policy, now);
  return out;
}

}  // namespace hf::pool
