#include "hyperfleet/sim/product/pass_skipping.h"

#include <algorithm>
#include <map>
#include <string_view>

namespace hf::sim::product {

void ConsiderNode(const model::Node& n, const provider::InstanceObservation* observed,
                  const model::NodeLiveness* heard, const control::ClusterSnapshot& snapshot,
                  SystemTime now, std::optional<SystemTime>& next) {
  auto consider = [&](SystemTime t) {
    if (t >= now && (!next || t < *next)) next = t;
  };
  const control::LivenessPolicy& policy = snapshot.liveness_policy;
  if (observed) {
    // Silence (LastHeard in health.cc), for every reported instance whatever its status:
    // conservative.
    const bool heartbeating = heard && heard->last_heard == now;
    if (!heartbeating) {
      SystemTime last = std::max({n.launch_time, n.recovered_at, policy.listening_since,
                                  observed->boot_time});
      if (heard) last = std::max(last, heard->last_heard);
      consider(last + policy.unresponsive_after);
    }
    if (n.lifecycle_state.empty()) {
      consider(control::AgentStartCountedFrom(n, *observed) + snapshot.agent_start_timeout);
    }
  }
  if (const auto& started = n.recovery_progress.started_at) {
    consider(n.recovery_progress.asked_at.value_or(*started) + kRebootRetryAfter);
    consider(*started + snapshot.reboot_timeout);
  }
  if (n.fault) consider(n.fault->retry_at);
}

std::optional<SystemTime> NextDecisionTime(const control::ClusterSnapshot& snapshot,
                                           SystemTime now) {
  std::map<std::string_view, const provider::InstanceObservation*> observed;
  for (const auto& o : snapshot.instances) observed[o.instance_id] = &o;
  std::optional<SystemTime> next;
  for (const model::Node& n : snapshot.nodes) {
    auto o = observed.find(n.instance_id);
    auto heard = snapshot.liveness.find(n.instance_id);
    ConsiderNode(n, o != observed.end() ? o->second : nullptr,
                 heard != snapshot.liveness.end() ? &heard->second : nullptr, snapshot, now,
                 next);
  }
  return next;
}

SystemTime FirstPassAtOrAfter(SystemTime last, Duration interval, SystemTime at) {
  if (at <= last) return last + interval;
  const auto k = (at - last + interval - Duration(1)) / interval;  // ceil
  return last + std::max<decltype(k)>(k, 1) * interval;
}

}  // namespace hf::sim::product
