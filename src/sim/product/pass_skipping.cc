#include "hyperfleet/sim/product/pass_skipping.h"

#include <algorithm>
#include <map>

namespace hf::sim::product {

std::optional<SystemTime> NextDecisionTime(const control::ClusterSnapshot& snapshot,
                                           SystemTime now) {
  std::optional<SystemTime> next;
  auto consider = [&](SystemTime t) {
    if (t >= now && (!next || t < *next)) next = t;
  };
  std::map<std::string, const provider::InstanceObservation*> observed;
  for (const auto& o : snapshot.instances) observed[o.instance_id] = &o;
  const control::LivenessPolicy& policy = snapshot.liveness_policy;
  for (const model::Node& n : snapshot.nodes) {
    auto o = observed.find(n.instance_id);
    if (o != observed.end()) {
      // Silence (LastHeard in health.cc), for every reported instance whatever its status:
      // conservative.
      auto heard = snapshot.liveness.find(n.instance_id);
      const bool heartbeating = heard != snapshot.liveness.end() && heard->second.last_heard == now;
      if (!heartbeating) {
        SystemTime last = std::max({n.launch_time, n.recovered_at, policy.listening_since,
                                    o->second->boot_time});
        if (heard != snapshot.liveness.end()) last = std::max(last, heard->second.last_heard);
        consider(last + policy.unresponsive_after);
      }
    }
    if (n.lifecycle_state.empty() && o != observed.end()) {
      consider(control::AgentStartCountedFrom(n, *o->second) + snapshot.agent_start_timeout);
    }
    if (const auto& started = n.recovery_progress.started_at) {
      consider(n.recovery_progress.asked_at.value_or(*started) + kRebootRetryAfter);
      consider(*started + snapshot.reboot_timeout);
    }
    if (n.fault) consider(n.fault->retry_at);
  }
  return next;
}

SystemTime FirstPassAtOrAfter(SystemTime last, Duration interval, SystemTime at) {
  if (at <= last) return last + interval;
  const auto k = (at - last + interval - Duration(1)) / interval;  // ceil
  return last + std::max<decltype(k)>(k, 1) * interval;
}

}  // namespace hf::sim::product
