// The product engine's world: the cluster, the failure process's faults made into what the
// product sees (a stopped machine, a silent agent, a health verdict, a watchdog's Slurm
// request), machine repairs, and the training job on top. The event loop is driver.cc.
#include "hyperfleet/sim/product/product_engine.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "sim/product/engine_impl.h"

namespace hf::sim::product {
namespace {

namespace cs = model::cluster_status;
constexpr const char* kControllerGroup = "controller";
constexpr const char* kWorkerGroup = "workers";
/// The instant the simulated world starts (2026-01-01T00:00:00Z), as the tests' FakeClock.
const SystemTime kStart = SystemTime(std::chrono::seconds(1767225600));

/// The groups' instance types: the pool grants each launch a machine of its type, so the
/// controller's machine (outside the failure process) serves the controller group only.
constexpr const char* kControllerType = "ml.m5.12xlarge";
constexpr const char* kWorkerType = "ml.p5.48xlarge";

model::InstanceGroup Group(const std::string& name, const std::string& type, int count) {
  model::InstanceGroup g;
  g.name = name;
  g.instance_type = type;
  g.target_count = count;
  g.spec = {{"InstanceGroupName", name}, {"InstanceType", g.instance_type},
            {"InstanceCount", count},
            {"LifeCycleConfig", {{"SourceS3Uri", "s3://sim/lifecycle/"}, {"OnCreate", "on_create.sh"}}}};
  return g;
}

pool::PoolPolicy PoolPolicyFor(const Strategy& s) {
  pool::PoolPolicy p;
  p.lemon_failures = s.quarantine_lemons ? s.quarantine_failures : 0;
  p.lemon_window = std::chrono::duration_cast<Duration>(
      std::chrono::duration<double, std::ratio<86400>>(s.quarantine_window_days));
  return p;
}

}  // namespace

ProductEngine::Impl::Impl(const FgufParams& p, const Strategy& s, int sp, uint64_t sd,
                          ProductOptions o)
    : params(p), strategy(s), spares(sp), seed(sd), options(std::move(o)), clock(kStart),
      ids(static_cast<unsigned>(sd)), pool(clock, PoolPolicyFor(s)), rng(SimRng::StreamSeed(sd, kStreamEngine, 0)),
      process(p, sd), ledger(s.CheckpointFor(p)) {
  if (p.job_nodes <= 0 || sp < 0 || p.job_nodes + sp > p.fleet_nodes) {
    throw std::invalid_argument("job_nodes + spares must be positive and at most fleet_nodes");
  }
  sqlite = std::move(store::OpenSqliteStore(":memory:").value());
  store = std::make_unique<CountingStore>(*sqlite, counters);
  controller_machine = p.fleet_nodes;
  machine_fault.resize(static_cast<size_t>(p.fleet_nodes) + 1);
  quarantined.resize(static_cast<size_t>(p.fleet_nodes) + 1, false);
  pool.add(0, p.fleet_nodes, kWorkerType);
  pool.add(controller_machine, 1, kControllerType);
  SimProvider::Hooks ph;
  ph.booted = [this](const std::string& id) { onBooted(id, false); };
  ph.rebooted = [this](const std::string& id) { onBooted(id, true); };
  ph.gone = [this](const std::string&, int machine) { onGone(machine); };
  ph.exhausted = [this] { ++counters.spare_exhaustions; };
  provider = std::make_unique<SimProvider>(clock, events, pool, options.latencies,
                                           SimRng(SimRng::StreamSeed(sd, kStreamEngine, 1)), ph);
  SimAgents::Hooks ah;
  ah.changed = [this](const std::string& id) { enqueue(id); };
  ah.marked_down = [this](const std::string& name) { onMarkedDown(name); };
  agents = std::make_unique<SimAgents>(*provider, *store, clock, events, ids, options.latencies,
                                       SimRng(SimRng::StreamSeed(sd, kStreamEngine, 2)), ah);
  // The resync is off (pass_skipping.h): the liveness pass revisits the only cluster.
  controller_options.resync_interval = std::chrono::hours(24 * 365 * 10);
  controller_options.liveness.listening_since = clock.now();
  control::ClusterController::AgentHooks hooks;
  hooks.liveness = [this](const std::string& id) { return agents->liveness(id); };
  hooks.publish_slurm_marks = [this](const std::string& id, std::vector<model::SlurmMark> m) {
    agents->publish(id, std::move(m));
  };
  controller = std::make_unique<control::ClusterController>(*store, *provider, clock, ids,
                                                            controller_options, hooks);
}

Status ProductEngine::Impl::createCluster() {
  model::Cluster c;
  c.id = ids.clusterId();
  c.name = "fleet-sim";
  c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/" + c.id;
  c.creation_time = clock.now();
  c.spec = {{"Orchestrator", {{"Slurm", {{"SlurmConfigStrategy", "Managed"}}}}},
            {"NodeRecovery", "Automatic"}};
  c.groups = {Group(kControllerGroup, kControllerType, 1),
              Group(kWorkerGroup, kWorkerType, params.job_nodes + spares)};
  store::WriteBatch b;
  b.clusters.push_back({c, store::kMustNotExist, false});
  HF_RETURN_IF_ERROR(store->commit(b).status());
  cluster_id = c.id;
  agents->setCluster(c, kControllerGroup);
  return absl::OkStatus();
}

int ProductEngine::Impl::machineOf(const std::string& host) const {
  int found = -1;
  SystemTime newest{};
  for (const auto& [id, i] : provider->instances()) {
    if (i.hostname == host && i.machine >= 0 && i.state != provider::InstanceState::kTerminating &&
        (found < 0 || i.boot_time > newest)) {
      found = i.machine;
      newest = i.boot_time;
    }
  }
  return found;
}

std::map<std::string, int> ProductEngine::Impl::machinesByHost() const {
  std::map<std::string, int> out;
  std::map<std::string, SystemTime> boot;
  for (const auto& [id, i] : provider->instances()) {
    if (i.machine < 0 || i.state == provider::InstanceState::kTerminating) continue;
    auto [it, fresh] = boot.emplace(i.hostname, i.boot_time);
    if (fresh || i.boot_time > it->second) {
      it->second = i.boot_time;
      out[i.hostname] = i.machine;
    }
  }
  return out;
}

// ---- faults ----

void ProductEngine::Impl::onFleetEvent(const FleetEvent& e) {
  switch (e.kind) {
    case EventKind::kPlanned:
      if (running) {
        ledger.Stop(ToMin(*this, clock.now()), StopClass::kPlanned, Loss::kRestart);
        running = false;
        for (const auto& h : allocated) agents->setAllocated(h, false);
      }
      return;
    case EventKind::kFailSlowStart:
    case EventKind::kFailSlowEnd:
      transient_factor = e.kind == EventKind::kFailSlowStart ? e.factor : 1.0;
      updateSlowdown();
      return;
    case EventKind::kFault:
      break;
  }
  if (e.remedy == Remedy::kRestartInPlace) {
    // A job crash (software): no node is at fault. Slurm requeues it once noticed (the
    // strategy's assumed detection), after a person's fix when it needs one.
    if (!running && !restarting) return;
    jobStop(StopClass::kD3, Loss::kDetection);
    double hold = rng.Sample(strategy.detect[static_cast<int>(DetectClass::kD3JobCrash)]);
    if (e.needs_human) {
      hold += strategy.human_fix_min;
      ++human_interventions;
    }
    hold_until = std::max(hold_until, clock.now() + Minutes(hold));
    events.schedule(hold_until, [this] {
      if (!running) ledger.Phase(ToMin(*this, clock.now()), Loss::kRestart);
    });
    return;
  }
  faultMachine(e.node, e);
  for (int k = e.group_first; e.group_size > 0 && k < e.group_first + e.group_size; ++k) {
    if (k == e.node || k < 0 || k >= params.fleet_nodes) continue;
    // The rest of a switch's group: cut off, sound after a reboot.
    FleetEvent g = e;
    g.node = k;
    g.cause = Cause::kNetwork;
    g.detect = DetectClass::kD2Network;
    g.remedy = Remedy::kReboot;
    g.needs_human = false;
    g.group_size = 0;
    faultMachine(k, g);
  }
}

void ProductEngine::Impl::faultMachine(int m, const FleetEvent& e) {
  if (machine_fault[m] || quarantined[m]) return;  // already broken, or out for good
  process.ClearBad(m);
  if (pool.idle(m)) {  // idle in the pool: found by its next check
    machine_fault[m] = e;
    outOfService(m);
    return;
  }
  const std::string id = provider->onMachine(m);
  if (id.empty()) return;  // in repair: out of service
  machine_fault[m] = e;
  applyEffect(id, e);
  const SimInstance* i = provider->find(id);
  if (i && allocated_set.count(i->hostname)) jobFault(e, i->hostname);
}

void ProductEngine::Impl::applyEffect(const std::string& id, const FleetEvent& e) {
  const SimInstance* i = provider->find(id);
  if (!i || i->state != provider::InstanceState::kRunning) return;  // applied once it boots
  switch (e.detect) {
    case DetectClass::kD1Loud:
      if (e.cause == Cause::kHostHw || e.cause == Cause::kHostMaint) {
        provider->stop(id, "the machine stopped (" + std::string(ToString(e.cause)) + ")");
      } else {
        const bool reboot = e.remedy == Remedy::kReboot;
        provider->reportHealth(id,
                               reboot ? model::HealthSeverity::kSoftFault
                                      : model::HealthSeverity::kHardFault,
                               "gpu.xid", "simulated " + std::string(ToString(e.cause)) + " fault");
      }
      break;
    case DetectClass::kD2Network:
      provider->silence(id);
      break;
    case DetectClass::kD3JobCrash:  // a node fault seen only as the job's crash
    case DetectClass::kD4Hang:
    case DetectClass::kD5Silent: {
      // Not detected by Hyperfleet: the strategy's assumed watchdog asks Slurm to replace it.
      const double after = rng.Sample(strategy.detect[static_cast<int>(e.detect)]) +
                           rng.Sample(strategy.localize);
      const std::string host = i->hostname;
      events.schedule(clock.now() + Minutes(after), [this, e, host] { watchdog(e, host); });
      break;
    }
  }
}

void ProductEngine::Impl::watchdog(const FleetEvent& e, const std::string& host) {
  if (!machine_fault[e.node]) return;  // replaced or repaired meanwhile
  std::vector<std::string> evict{host};
  if (e.detect == DetectClass::kD4Hang) {
    // Over-eviction: the suspect group (strategy.hang_evict_nodes) of the job's nodes.
    auto it = std::find(allocated.begin(), allocated.end(), host);
    for (size_t k = 1; it != allocated.end() &&
                       k < static_cast<size_t>(std::max(1, strategy.hang_evict_nodes));
         ++k) {
      const size_t at = static_cast<size_t>(it - allocated.begin()) + k;
      if (at < allocated.size()) {
        evict.push_back(allocated[at]);
        ++false_positive_evictions;
      }
    }
  }
  if (e.detect == DetectClass::kD5Silent && sdc_pending) {
    sdc_pending = false;
    jobStop(StopClass::kD5, Loss::kDetection);
    requeue_wait.insert(host);
  }
  for (const auto& h : evict) agents->userDown(h, "Action:Replace");
}

void ProductEngine::Impl::onBooted(const std::string& id, bool reboot) {
  const SimInstance* i = provider->find(id);
  if (!i) return;
  const int m = i->machine;
  if (m >= 0 && machine_fault[m]) {
    if (reboot && machine_fault[m]->remedy == Remedy::kReboot) {
      machine_fault[m].reset();  // a reboot fixes it
    } else {
      applyEffect(id, *machine_fault[m]);
      return;
    }
  }
  if (!reboot) agents->startLifecycle(id);
}

void ProductEngine::Impl::outOfService(int m) {
  const FleetEvent& e = *machine_fault[m];
  const bool reboot = e.remedy == Remedy::kReboot;  // as startRepair
  if (pool.fault(m, std::string(ToString(e.cause)), reboot) ==
      PolicyMachinePool::Fault::kQuarantine) {
    quarantine(m);
  } else {
    startRepair(m);
  }
}

void ProductEngine::Impl::quarantine(int m) {
  quarantined[m] = true;
  ++(process.traits(m).lemon ? lemons_quarantined : healthy_quarantined);
  const double now = std::max(0.0, ToMin(*this, clock.now()));
  const double diagnosed = now + rng.Sample(params.quarantine_diagnosis);
  RepairOutcome out = process.Repair(m, Remedy::kReplace, diagnosed, strategy.deep_check_min,
                                     strategy.deep_check_catch);
  for (int k = 0; k < 8 && out.caught_by_check; ++k) {
    out = process.Repair(m, Remedy::kReplace, out.done_min, strategy.deep_check_min,
                         strategy.deep_check_catch);
  }
  events.schedule(origin + Minutes(out.done_min), [this, m, bad = out.bad] {
    quarantined[m] = false;
    machine_fault[m].reset();
    if (bad) {
      process.ReturnBad(m, ToMin(*this, clock.now()));
      if (repump) repump();
    }
    provider->machineFree(m);  // the operator's return, through the pool's return check
  });
}

void ProductEngine::Impl::onGone(int machine) {
  if (machine < 0 || quarantined[machine]) return;  // out of service for good
  if (machine_fault[machine]) {
    outOfService(machine);
  } else {
    provider->machineFree(machine);
  }
}

void ProductEngine::Impl::startRepair(int m) {
  const FleetEvent& e = *machine_fault[m];
  const Remedy remedy = e.remedy == Remedy::kReboot ? Remedy::kReboot : Remedy::kReplace;
  const double now = std::max(0.0, ToMin(*this, clock.now()));
  RepairOutcome out = process.Repair(m, remedy, now, strategy.deep_check_min,
                                     strategy.deep_check_catch);
  for (int k = 0; k < 8 && out.caught_by_check; ++k) {
    out = process.Repair(m, Remedy::kReplace, out.done_min, strategy.deep_check_min,
                         strategy.deep_check_catch);
  }
  events.schedule(origin + Minutes(out.done_min), [this, m, bad = out.bad] {
    machine_fault[m].reset();
    if (bad) {
      process.ReturnBad(m, ToMin(*this, clock.now()));
      if (repump) repump();  // its fault may come before the next one queued
    }
    provider->machineFree(m);
  });
}

// ---- the job ----

void ProductEngine::Impl::jobFault(const FleetEvent& e, const std::string& host) {
  if (e.detect == DetectClass::kD5Silent) {
    if (running) {
      ledger.Corrupt(ToMin(*this, clock.now()));
      sdc_pending = true;
    }
    return;  // it stops when the watchdog finds it
  }
  jobStop(StopClassOf(e.detect), Loss::kDetection);
  requeue_wait.insert(host);
  if (e.needs_human) {
    ++human_interventions;
    hold_until = std::max(hold_until, clock.now() + Minutes(strategy.human_fix_min));
  }
}

void ProductEngine::Impl::jobStop(StopClass cls, Loss phase) {
  ledger.Stop(ToMin(*this, clock.now()), cls, phase);
  running = false;
  restarting = false;
  ++restart_gen;
  for (const auto& h : allocated) agents->setAllocated(h, false);
}

void ProductEngine::Impl::onMarkedDown(const std::string& name) {
  if (requeue_wait.erase(name) && requeue_wait.empty() && !running) {
    // Slurm requeued the job: it waits for nodes now.
    ledger.Phase(ToMin(*this, clock.now()), Loss::kWaitNode);
  }
}

void ProductEngine::Impl::settleRequeueWait() {
  const auto& slurm = agents->slurm();
  bool dropped = false;
  for (auto it = requeue_wait.begin(); it != requeue_wait.end();) {
    auto s = slurm.find(*it);
    const int m = machineOf(*it);
    const bool faulty = m >= 0 && m < static_cast<int>(machine_fault.size()) && machine_fault[m];
    if (s == slurm.end() || s->second.down || !faulty) {
      it = requeue_wait.erase(it);
      dropped = true;
    } else {
      ++it;
    }
  }
  if (dropped && requeue_wait.empty() && !running) {
    ledger.Phase(ToMin(*this, clock.now()), Loss::kWaitNode);
  }
}

void ProductEngine::Impl::tryStart() {
  if (!requeue_wait.empty()) settleRequeueWait();
  if (running || restarting || !requeue_wait.empty() || clock.now() < hold_until ||
      origin == SystemTime{}) {
    return;
  }
  std::set<std::string> up = agents->upNodes();
  up.erase(controller_host);
  if (static_cast<int>(up.size()) < params.job_nodes) return;
  // Slurm gives the requeued job N idle nodes: those it had first, then by name.
  std::vector<std::string> chosen;
  for (const auto& h : allocated) {
    if (up.count(h) && static_cast<int>(chosen.size()) < params.job_nodes) chosen.push_back(h);
  }
  std::set<std::string> taken(chosen.begin(), chosen.end());
  for (const auto& h : up) {
    if (static_cast<int>(chosen.size()) >= params.job_nodes) break;
    if (!taken.count(h)) chosen.push_back(h);
  }
  allocated = std::move(chosen);
  allocated_set = std::set<std::string>(allocated.begin(), allocated.end());
  restarting = true;
  ledger.Phase(ToMin(*this, clock.now()), Loss::kRestart);
  const uint64_t gen = ++restart_gen;
  const double delay =
      rng.Sample(options.latencies.slurm_start) + rng.Sample(options.app_restart);
  events.schedule(clock.now() + Minutes(delay), [this, gen] {
    if (gen != restart_gen || !restarting) return;
    restarting = false;
    startJob();
  });
}

void ProductEngine::Impl::startJob() {
  running = true;
  ledger.Run(ToMin(*this, clock.now()));
  for (const auto& h : allocated) agents->setAllocated(h, true);
  updateSlowdown();
  if (strategy.straggler_evict_min < 0) return;
  const std::map<std::string, int> machine_of = machinesByHost();
  for (const auto& h : allocated) {
    auto it = machine_of.find(h);
    const int m = it == machine_of.end() ? -1 : it->second;
    if (m < 0 || m >= params.fleet_nodes || process.traits(m).slow_factor <= 1.0) continue;
    events.schedule(clock.now() + Minutes(strategy.straggler_evict_min),
                    [this, m, h] { evictStraggler(m, h); });
  }
}

void ProductEngine::Impl::evictStraggler(int m, const std::string& host) {
  if (quarantined[m] || !allocated_set.count(host) || machineOf(host) != m) return;
  if (!running) {  // at the next chance
    events.schedule(clock.now() + Minutes(10), [this, m, host] { evictStraggler(m, host); });
    return;
  }
  // Checkpoint-aligned, like a planned interruption (as the parametric engine): the slow
  // machine leaves for good, Hyperfleet replaces its node through Slurm's Action:Replace.
  ++straggler_evictions;
  ledger.Stop(ToMin(*this, clock.now()), StopClass::kPlanned, Loss::kFailSlow);
  running = false;
  ++restart_gen;
  for (const auto& h : allocated) agents->setAllocated(h, false);
  quarantined[m] = true;
  agents->userDown(host, "Action:Replace");
}

void ProductEngine::Impl::updateSlowdown() {
  if (origin == SystemTime{}) return;
  const std::map<std::string, int> machine_of = machinesByHost();
  double slowest = 1.0;
  for (const auto& h : allocated) {
    auto it = machine_of.find(h);
    const int m = it == machine_of.end() ? -1 : it->second;
    if (m >= 0 && m < params.fleet_nodes) slowest = std::max(slowest, process.traits(m).slow_factor);
  }
  ledger.SetSlowdown(ToMin(*this, clock.now()), slowest * transient_factor);
}

RunResult ProductEngine::Impl::result() {
  RunResult r;
  FillRunIdentity(params, strategy, spares, seed, &r);
  r.spare_exhaustions = counters.spare_exhaustions;
  r.lemons_quarantined = lemons_quarantined;
  r.healthy_quarantined = healthy_quarantined;
  r.straggler_evictions = straggler_evictions;
  r.false_positive_evictions = false_positive_evictions;
  r.human_interventions = human_interventions;
  FillFromLedger(ledger, &r);
  return r;
}

// ---- ProductEngine ----

ProductEngine::ProductEngine(const FgufParams& params, const Strategy& strategy, int spares,
                             uint64_t seed, ProductOptions options)
    : impl_(std::make_unique<Impl>(params, strategy, spares, seed, std::move(options))) {}

ProductEngine::~ProductEngine() = default;

Status ProductEngine::bringUp() {
  Impl& im = *impl_;
  HF_RETURN_IF_ERROR(im.createCluster());
  // Bring-up is not measured: with every latency at its mean the whole fleet boots in step,
  // so its thousands of lifecycle results take a few passes instead of one pass each.
  const ProductLatencies measured = im.options.latencies;
  for (Dist* d : {&im.options.latencies.boot, &im.options.latencies.agent_start,
                  &im.options.latencies.lifecycle, &im.options.latencies.slurm_mark}) {
    d->cv = 0;
  }
  const SystemTime deadline = im.clock.now() + std::chrono::hours(1);
  const int workers = im.params.job_nodes + im.spares;
  for (;;) {
    im.drive(im.clock.now() + std::chrono::seconds(1));
    HF_ASSIGN_OR_RETURN(model::Cluster c, im.store->clusterById(im.cluster_id));
    std::set<std::string> up = im.agents->upNodes();
    for (const auto& [id, i] : im.provider->instances()) {
      if (i.spec.group == kControllerGroup) im.controller_host = i.hostname;
    }
    up.erase(im.controller_host);
    if (c.status == cs::kInService && static_cast<int>(up.size()) >= workers) break;
    if (im.clock.now() > deadline) {
      im.options.latencies = measured;
      return absl::DeadlineExceededError("the simulated cluster did not come up within an hour");
    }
  }
  im.options.latencies = measured;
  im.origin = im.clock.now();
  const std::set<std::string> up = im.agents->upNodes();
  im.allocated.assign(up.begin(), up.end());
  im.allocated.erase(std::remove(im.allocated.begin(), im.allocated.end(), im.controller_host),
                     im.allocated.end());
  im.allocated.resize(static_cast<size_t>(im.params.job_nodes));
  im.allocated_set = std::set<std::string>(im.allocated.begin(), im.allocated.end());
  im.startJob();
  return absl::OkStatus();
}

RunResult ProductEngine::run() {
  Impl& im = *impl_;
  const double horizon = im.params.horizon_min();
  // The failure process feeds the queue one event at a time; a repair's bad return may put an
  // earlier one in front (repump then queues it too).
  auto next_pump = std::make_shared<SystemTime>(SystemTime::max());
  auto pump = std::make_shared<std::function<void()>>();
  im.repump = [&im, pump, next_pump] {
    const double t = im.process.PeekTime();
    if (!std::isfinite(t)) return;
    const SystemTime at = im.origin + Minutes(t);
    if (at >= *next_pump) return;
    *next_pump = at;
    im.events.schedule(at, [pump] { (*pump)(); });
  };
  *pump = [&im, next_pump] {
    *next_pump = SystemTime::max();
    while (std::isfinite(im.process.PeekTime()) &&
           im.origin + Minutes(im.process.PeekTime()) <= im.clock.now()) {
      im.onFleetEvent(im.process.Pop());
    }
    im.repump();
  };
  im.repump();
  im.drive(im.origin + Minutes(horizon));
  im.ledger.Finish(horizon);
  im.repump = nullptr;
  *pump = nullptr;
  return im.result();
}

void ProductEngine::inject(const FleetEvent& e) {
  impl_->onFleetEvent(e);
  impl_->quiet = false;
  impl_->decision.reset();
}
void ProductEngine::runFor(Duration d) { impl_->drive(impl_->clock.now() + d); }
SystemTime ProductEngine::now() const { return impl_->clock.now(); }
double ProductEngine::nowMin() const { return ToMin(*impl_, impl_->clock.now()); }
store::Store& ProductEngine::store() { return *impl_->store; }
const std::string& ProductEngine::clusterId() const { return impl_->cluster_id; }
const JobLedger& ProductEngine::ledger() const { return impl_->ledger; }
const ProductCounters& ProductEngine::counters() const { return impl_->counters; }
SimProvider& ProductEngine::provider() { return *impl_->provider; }
SimAgents& ProductEngine::agents() { return *impl_->agents; }
int ProductEngine::jobMachine(int k) const { return impl_->machineOf(impl_->allocated.at(k)); }

RunResult RunProduct(const FgufParams& params, const Strategy& strategy, int spares,
                     uint64_t seed) {
  ProductEngine engine(params, strategy, spares, seed);
  Status s = engine.bringUp();
  if (!s.ok()) throw std::runtime_error(std::string(s.message()));
  return engine.run();
}

}  // namespace hf::sim::product
