#include "hyperfleet/sim/product/sim_agents.h"

#include "hyperfleet/agentapi/node_records.h"
#include "hyperfleet/agentapi/protocol.h"

namespace hf::sim::product {

using provider::InstanceState;

SimAgents::SimAgents(SimProvider& provider, store::Store& store, SimClock& clock,
                     EventQueue& events, IdSource& ids, const ProductLatencies& latencies,
                     SimRng rng, Hooks hooks)
    : provider_(provider), store_(store), clock_(clock), events_(events), ids_(ids),
      latencies_(latencies), rng_(rng), hooks_(std::move(hooks)) {}

void SimAgents::setCluster(model::Cluster cluster, std::string controller_group) {
  cluster_ = std::move(cluster);
  controller_group_ = std::move(controller_group);
}

const std::map<std::string_view, const SimInstance*>& SimAgents::byHost() const {
  // Rebuilt only when the provider changed (every change to an instance's state, hostname or
  // boot moves its version; the map's entries stay put until erased, which moves it too).
  if (hosts_version_ == provider_.version()) return hosts_;
  hosts_.clear();
  for (const auto& [id, i] : provider_.instances()) {
    if (i.state == InstanceState::kTerminating) continue;
    // Views into the provider's records (stable map nodes): no hostname copied.
    auto [it, fresh] = hosts_.emplace(i.hostname, &i);
    if (!fresh && i.boot_time > it->second->boot_time) it->second = &i;
  }
  hosts_version_ = provider_.version();
  return hosts_;
}

std::set<std::string> SimAgents::upNodes() const {
  std::set<std::string> out;
  for (const auto& [name, i] : byHost()) {
    auto s = slurm_.find(std::string(name));
    if (s == slurm_.end() || s->second.down) continue;
    if (i->state == InstanceState::kRunning && i->slurmd_up && !i->silent_since) {
      out.emplace(name);
    }
  }
  return out;
}

std::map<std::string, model::NodeLiveness> SimAgents::heartbeats(const std::string& cluster_id,
                                                                 bool* controller_up) const {
  std::map<std::string, model::NodeLiveness> out;
  const SystemTime now = clock_.now();
  bool up = false;
  for (const auto& [id, i] : provider_.instances()) {
    if (i.spec.cluster_id != cluster_id) continue;
    // The provider's map is sorted by id: each insert goes at the end (no key comparisons).
    if (i.silent_since) {
      out.emplace_hint(out.end(), id, model::NodeLiveness{*i.silent_since, i.health});
    } else if (i.agent_up) {
      out.emplace_hint(out.end(), id, model::NodeLiveness{now, i.health});
      up |= i.spec.group == controller_group_;
    }
  }
  if (controller_up) *controller_up = up;
  return out;
}

model::ClusterHealthView SimAgents::liveness(const std::string& cluster_id) {
  model::ClusterHealthView view;
  view.controller_group = controller_group_;
  bool controller_up = false;
  view.nodes = heartbeats(cluster_id, &controller_up);
  if (!controller_up) return view;  // no fresh report from slurmctld's node
  const auto& hosts = byHost();
  std::vector<model::SlurmNodeState>& nodes = view.slurm_nodes.emplace();
  nodes.reserve(slurm_.size());
  auto h = hosts.begin();  // both sorted by name: walked together
  for (const auto& [name, s] : slurm_) {
    while (h != hosts.end() && h->first < std::string_view(name)) ++h;
    const bool responding = h != hosts.end() && h->first == name && h->second->state == InstanceState::kRunning &&
                            h->second->slurmd_up && !h->second->silent_since;
    model::SlurmNodeState& n = nodes.emplace_back();
    n.name = name;
    n.state = s.down ? "down" : s.allocated ? "allocated" : "idle";
    if (!responding) n.state += "*";
    n.alloc_cpus = s.allocated && !s.down ? 4 : 0;
    n.reason = s.reason;
    n.reason_time = s.reason_time;
  }
  return view;
}

bool SimAgents::needed(const model::SlurmMark& m) const {
  auto s = slurm_.find(m.node);
  if (s == slurm_.end()) return false;
  if (m.action == "down") return !(s->second.down && s->second.reason == m.reason);
  return s->second.down && s->second.reason == m.reason;  // resume, only from that mark
}

void SimAgents::publish(const std::string&, std::vector<model::SlurmMark> marks) {
  wanted_ = std::move(marks);
  if (apply_pending_) return;  // the next heartbeat takes the latest marks
  bool any = false;
  for (const auto& m : wanted_) any |= needed(m);
  if (!any) return;
  apply_pending_ = true;
  events_.schedule(clock_.now() + Minutes(rng_.Sample(latencies_.slurm_mark)), [this] { apply(); });
}

void SimAgents::apply() {
  apply_pending_ = false;
  // reason_time has Slurm's one-second resolution.
  const SystemTime second = std::chrono::time_point_cast<std::chrono::seconds>(clock_.now());
  for (const auto& m : wanted_) {
    if (!needed(m)) continue;
    SimSlurmNode& s = slurm_[m.node];
    ++version_;
    if (m.action == "down") {
      s.down = true;
      s.reason = m.reason;
      s.reason_time = second;
      if (hooks_.marked_down) hooks_.marked_down(m.node);
    } else {
      s.down = false;
      s.reason.clear();
      s.reason_time = {};
    }
  }
}

void SimAgents::setAllocated(const std::string& name, bool allocated) {
  auto it = slurm_.find(name);
  if (it == slurm_.end() || it->second.allocated == allocated) return;
  it->second.allocated = allocated;
  ++version_;
}

void SimAgents::userDown(const std::string& name, const std::string& reason) {
  SimSlurmNode& s = slurm_[name];
  s.down = true;
  s.reason = reason;
  s.reason_time = std::chrono::time_point_cast<std::chrono::seconds>(clock_.now());
  ++version_;
  if (hooks_.marked_down) hooks_.marked_down(name);
}

void SimAgents::startLifecycle(const std::string& instance_id) {
  const SimInstance* i = provider_.find(instance_id);
  if (!i) return;
  slurm_.try_emplace(i->hostname);  // slurm.conf lists every node by address
  const uint64_t gen = i->generation;
  auto report = [this, instance_id](const char* state) {
    auto wrote = agentapi::RecordLifecycleResult(store_, clock_, ids_, cluster_, instance_id,
                                                 state, "", "");
    ++version_;
    if (wrote.ok() && *wrote && hooks_.changed) hooks_.changed(cluster_.id);
  };
  const SystemTime started = clock_.now() + Minutes(rng_.Sample(latencies_.agent_start));
  const SystemTime succeeded = started + Minutes(rng_.Sample(latencies_.lifecycle));
  events_.schedule(started, [this, instance_id, gen, report] {
    const SimInstance* s = provider_.find(instance_id);
    if (!s || s->generation != gen || !s->agent_up || s->silent_since) return;
    provider_.slurmdUp(instance_id);
    report(agentapi::kStarted);
  });
  events_.schedule(succeeded, [this, instance_id, gen, report] {
    const SimInstance* s = provider_.find(instance_id);
    if (!s || !s->agent_up || s->silent_since || !s->slurmd_up) return;
    (void)gen;
    report(agentapi::kSucceeded);
  });
}

}  // namespace hf::sim::product
