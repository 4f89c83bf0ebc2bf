#include "hyperfleet/sim/product/sim_provider.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace hf::sim::product {

using provider::InstanceState;

SimProvider::SimProvider(SimClock& clock, EventQueue& events, PolicyMachinePool& pool,
                         const ProductLatencies& latencies, SimRng rng, Hooks hooks)
    : clock_(clock), events_(events), pool_(pool), latencies_(latencies), rng_(rng),
      hooks_(std::move(hooks)) {}

SimInstance* SimProvider::get(std::string_view id) {
  auto it = instances_.find(std::string(id));
  return it == instances_.end() ? nullptr : &it->second;
}

const SimInstance* SimProvider::find(const std::string& instance_id) const {
  auto it = instances_.find(instance_id);
  return it == instances_.end() ? nullptr : &it->second;
}

std::string SimProvider::onMachine(int m) const {
  auto it = by_machine_.find(m);
  return it == by_machine_.end() ? "" : it->second;
}

std::string SimProvider::addressFor(const provider::InstanceSpec& spec) {
  if (!spec.private_ip.empty()) return spec.private_ip;
  const uint32_t n = next_address_++;  // 10.224.0.0/12, as the local provider's default pool
  return absl::StrCat("10.", 224 + (n >> 16), ".", (n >> 8) & 0xff, ".", n & 0xff);
}

Status SimProvider::launch(const provider::InstanceSpec& spec) {
  if (instances_.count(spec.instance_id)) return absl::OkStatus();  // idempotent by id
  SimInstance& i = instances_[spec.instance_id];
  i.spec = spec;
  i.private_ip = addressFor(spec);
  std::string host = "ip-" + i.private_ip;
  std::replace(host.begin(), host.end(), '.', '-');
  i.hostname = host;
  ++version_;
  place(i);
  return absl::OkStatus();
}

void SimProvider::place(SimInstance& i) {
  std::optional<int> m = pool_.acquire(i.spec.instance_id, i.spec.instance_type);
  if (!m) {
    waiting_.push_back(i.spec.instance_id);
    if (hooks_.exhausted) hooks_.exhausted();
    return;
  }
  i.machine = *m;
  by_machine_[*m] = i.spec.instance_id;
  const uint64_t gen = ++i.generation;
  const std::string id = i.spec.instance_id;
  events_.schedule(after(latencies_.boot), [this, id, gen] {
    SimInstance* b = get(id);
    if (!b || b->generation != gen || b->state != InstanceState::kPending) return;
    b->state = InstanceState::kRunning;
    b->boot_time = clock_.now();
    b->agent_up = true;
    ++b->generation;
    ++version_;
    if (hooks_.booted) hooks_.booted(id);
  });
}

void SimProvider::machineFree(int machine) {
  pool_.release(machine);
  std::deque<std::string> waiting;
  waiting.swap(waiting_);
  for (const std::string& id : waiting) {  // in launch order, each for its instance type
    SimInstance* i = get(id);
    if (!i || i->state != InstanceState::kPending || i->machine >= 0) continue;
    if (pool_.free_count(i->spec.instance_type) > 0) {
      place(*i);
    } else {
      waiting_.push_back(id);
    }
  }
}

void SimProvider::gone(const std::string& id) {
  SimInstance* i = get(id);
  if (!i) return;
  const int machine = i->machine;
  if (machine >= 0) by_machine_.erase(machine);
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), id), waiting_.end());
  instances_.erase(id);
  ++version_;
  if (hooks_.gone) hooks_.gone(id, machine);
}

Status SimProvider::terminate(std::string_view instance_id) {
  SimInstance* i = get(instance_id);
  if (!i || i->state == InstanceState::kTerminating) return absl::OkStatus();
  i->state = InstanceState::kTerminating;
  i->agent_up = i->slurmd_up = false;
  const uint64_t gen = ++i->generation;
  ++version_;
  const std::string id(instance_id);
  events_.schedule(after(latencies_.terminate), [this, id, gen] {
    SimInstance* t = get(id);
    if (t && t->generation == gen) gone(id);
  });
  return absl::OkStatus();
}

Status SimProvider::terminateNow(std::string_view instance_id) {
  SimInstance* i = get(instance_id);
  if (!i) return absl::OkStatus();
  if (i->state == InstanceState::kTerminating && i->message == "killed") return absl::OkStatus();
  i->state = InstanceState::kTerminating;
  i->message = "killed";
  i->agent_up = i->slurmd_up = false;
  const uint64_t gen = ++i->generation;
  ++version_;
  const std::string id(instance_id);
  events_.schedule(after(latencies_.kill), [this, id, gen] {
    SimInstance* t = get(id);
    if (t && t->generation == gen) gone(id);
  });
  return absl::OkStatus();
}

Status SimProvider::restart(std::string_view instance_id, bool hard) {
  SimInstance* i = get(instance_id);
  if (!i) return absl::NotFoundError(absl::StrCat("no instance ", std::string(instance_id)));
  if (i->state == InstanceState::kTerminating || i->machine < 0 ||
      (!hard && i->state != InstanceState::kRunning)) {
    return absl::FailedPreconditionError("the instance is not running");
  }
  i->state = InstanceState::kPending;
  i->message.clear();
  i->agent_up = i->slurmd_up = false;
  i->silent_since.reset();
  i->health.reset();
  const uint64_t gen = ++i->generation;
  ++version_;
  const std::string id(instance_id);
  events_.schedule(after(latencies_.reboot), [this, id, gen] {
    SimInstance* b = get(id);
    if (!b || b->generation != gen) return;
    b->state = InstanceState::kRunning;
    b->boot_time = clock_.now();
    b->agent_up = b->slurmd_up = true;  // enabled units (slurmd) start at boot
    ++b->generation;
    ++version_;
    if (hooks_.rebooted) hooks_.rebooted(id);
  });
  return absl::OkStatus();
}

Status SimProvider::reboot(std::string_view instance_id) { return restart(instance_id, false); }
Status SimProvider::powerCycle(std::string_view instance_id) { return restart(instance_id, true); }

StatusOr<std::vector<provider::InstanceObservation>> SimProvider::list(std::string_view cluster_id) {
  std::vector<provider::InstanceObservation> out;
  out.reserve(instances_.size());
  for (const auto& [id, i] : instances_) {
    if (i.spec.cluster_id != cluster_id) continue;
    provider::InstanceObservation& o = out.emplace_back();
    o.instance_id = id;
    o.cluster_id = i.spec.cluster_id;
    o.state = i.state;
    o.message = i.message;
    if (i.state != InstanceState::kPending || i.boot_time != SystemTime{}) {
      o.private_ip = i.private_ip;
      o.hostname = i.hostname;
    }
    o.boot_time = i.boot_time;
  }
  return out;
}

void SimProvider::stop(const std::string& instance_id, const std::string& why) {
  SimInstance* i = get(instance_id);
  if (!i) return;
  i->agent_up = i->slurmd_up = false;
  const uint64_t gen = ++i->generation;
  ++version_;
  events_.schedule(after(latencies_.dead_visible), [this, instance_id, why, gen] {
    SimInstance* s = get(instance_id);
    if (!s || s->generation != gen || s->state == InstanceState::kTerminating) return;
    s->state = InstanceState::kFailed;
    s->message = why;
    ++s->generation;
    ++version_;
  });
}

void SimProvider::silence(const std::string& instance_id) {
  SimInstance* i = get(instance_id);
  if (!i || i->silent_since) return;
  i->silent_since = clock_.now();
  i->slurmd_up = false;  // cut off: Slurm cannot reach it either
  ++version_;
}

void SimProvider::reportHealth(const std::string& instance_id, model::HealthSeverity verdict,
                               const std::string& check, const std::string& message) {
  SimInstance* i = get(instance_id);
  if (!i) return;
  const uint64_t gen = i->generation;
  const SystemTime at = after(latencies_.health_report);
  events_.schedule(at, [this, instance_id, verdict, check, message, gen] {
    SimInstance* s = get(instance_id);
    if (!s || s->generation != gen || !s->agent_up) return;
    model::HealthReport h;
    h.verdict = verdict;
    h.action = verdict == model::HealthSeverity::kHardFault ? model::HealthAction::kReplace
                                                            : model::HealthAction::kReboot;
    h.checked_at = clock_.now() - std::chrono::milliseconds(500);
    h.findings.push_back({check, verdict, h.action, message});
    s->health = std::move(h);
    ++version_;
  });
}

void SimProvider::slurmdUp(const std::string& instance_id) {
  SimInstance* i = get(instance_id);
  if (!i || i->slurmd_up || i->state != InstanceState::kRunning) return;
  i->slurmd_up = true;
  ++version_;
}

}  // namespace hf::sim::product
