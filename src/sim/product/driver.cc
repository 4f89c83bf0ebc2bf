// The product engine's event loop: the simulator's events and the controller's passes in one
// simulated timeline, with the skip rule of pass_skipping.h.
#include <algorithm>

#include "sim/product/engine_impl.h"
#include "hyperfleet/sim/product/pass_skipping.h"

namespace hf::sim::product {

namespace {
uint64_t WorldVersion(const ProductEngine::Impl& im) {
  return im.counters.commits + im.provider->version() + im.agents->version();
}
}  // namespace

void ProductEngine::Impl::enqueue(const std::string& id) {
  enqueued = true;
  controller->enqueue(id);
}

void ProductEngine::Impl::pass() {
  const SystemTime now = clock.now();
  if (started && interval > Duration::zero() && interval < std::chrono::hours(24 * 365)) {
    // Lattice points strictly between the last pass and this one: passes the rule skipped.
    counters.passes_skipped += static_cast<uint64_t>((now - last_pass - Duration(1)) / interval);
  }
  const uint64_t before = WorldVersion(*this);
  const double cpu0 = ThreadCpuSeconds();
  std::optional<SteadyTime> wake = controller->runOnce();
  while (!wake) {  // a reconcile ran; the next call says when work is next due
    ++counters.passes_run;
    wake = controller->runOnce();
  }
  counters.pass_cpu_s += ThreadCpuSeconds() - cpu0;
  started = true;
  last_pass = now;
  interval = *wake - clock.monotonic();
  quiet = WorldVersion(*this) == before;
  enqueued = false;
  decision.reset();
}

std::optional<SystemTime> ProductEngine::Impl::decisionTime() {
  const double cpu0 = ThreadCpuSeconds();
  ++counters.decide_snapshots;
  // What a snapshot would hold, read in place: the records as committed (one cluster: every
  // mirrored node is its) against the provider's instances, both sorted by instance id, walked
  // together. Per node: what list() reports (boot_time) and heartbeats() says.
  control::ClusterSnapshot policies;  // the rule reads only its policies
  policies.agent_start_timeout = controller_options.agent_start_timeout;
  policies.liveness_policy = controller_options.liveness;
  const SystemTime now = clock.now();
  const auto& instances = provider->instances();
  auto inst = instances.begin();
  provider::InstanceObservation observed;
  model::NodeLiveness heard;
  std::optional<SystemTime> next;
  for (const auto& [id, n] : store->mirror()) {
    while (inst != instances.end() && inst->first < id) ++inst;
    const bool found = inst != instances.end() && inst->first == id &&
                       inst->second.spec.cluster_id == cluster_id;
    const model::NodeLiveness* h = nullptr;
    if (found) {
      const SimInstance& i = inst->second;
      observed.boot_time = i.boot_time;
      if (i.silent_since || i.agent_up) {
        heard.last_heard = i.silent_since.value_or(now);
        h = &heard;
      }
    }
    ConsiderNode(n, found ? &observed : nullptr, h, policies, now, next);
  }
  counters.decide_cpu_s += ThreadCpuSeconds() - cpu0;
  return next;
}

void ProductEngine::Impl::drive(SystemTime end) {
  for (;;) {
    SystemTime next_pass = clock.now();
    if (started && !enqueued) {
      // The controller's lattice: the first of last_pass + k * interval at or after now.
      next_pass = interval >= std::chrono::hours(24 * 365)
                      ? SystemTime::max()
                      : FirstPassAtOrAfter(last_pass, interval, clock.now());
      // Only worth a snapshot when no event comes first anyway.
      if (options.skip_passes && quiet && next_pass != SystemTime::max() &&
          events.next() > next_pass) {
        if (!decision) decision = decisionTime();
        next_pass = *decision ? FirstPassAtOrAfter(last_pass, interval,
                                                   std::max(**decision, next_pass))
                              : SystemTime::max();
      }
    }
    const SystemTime event_at = events.next();
    if (event_at <= next_pass) {
      if (event_at > end) break;
      clock.set(event_at);
      EventQueue::Action action = events.pop();
      const uint64_t before = WorldVersion(*this);
      action();
      ++counters.events;
      // An event that changed nothing a snapshot holds (a repair ending in the pool, the
      // job's own restart, a stale completion) leaves the quiet stretch as it was.
      if (WorldVersion(*this) != before) {
        quiet = false;
        decision.reset();
      }
      tryStart();
      continue;
    }
    if (next_pass > end) break;
    clock.set(next_pass);
    pass();
    tryStart();
  }
  clock.set(end);
}

}  // namespace hf::sim::product
