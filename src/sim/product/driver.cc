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
  control::ClusterSnapshot snap;
  auto instances = provider->list(cluster_id);
  if (!instances.ok()) return clock.now();  // do not skip
  // The records as committed (one cluster: every mirrored node is its).
  snap.nodes.reserve(store->mirror().size());
  for (const auto& [id, n] : store->mirror()) snap.nodes.push_back(n);
  snap.instances = std::move(*instances);
  snap.lifecycle_by_agent = true;
  snap.agent_start_timeout = controller_options.agent_start_timeout;
  snap.liveness_policy = controller_options.liveness;
  model::ClusterHealthView live = agents->liveness(cluster_id);
  snap.liveness = std::move(live.nodes);
  std::optional<SystemTime> t = NextDecisionTime(snap, clock.now());
  counters.decide_cpu_s += ThreadCpuSeconds() - cpu0;
  return t;
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
