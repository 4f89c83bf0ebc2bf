// PlanCluster over random snapshots (after Nomad's reconcile_cluster_prop_test.go): clusters
// in every status, nodes in every status with recoveries, faults and marks, provider views
// that agree or not, agents' liveness and Slurm's view. Invariants, each a rule of
// docs/state-machines.md or of cluster_plan.h, must hold for every snapshot. A failure
// prints the seed (HF_PROP_SEED=<seed> replays it; HF_PROP_CASES sets the count) and the
// snapshot.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "hyperfleet/control/cluster_plan.h"
#include "plan_fixtures.h"

namespace hf::control {
namespace {

namespace cs = model::cluster_status;
namespace is = model::instance_status;
namespace ls = model::lifecycle_state;
using nlohmann::json;
using provider::InstanceState;
using Request = model::NodeRecoveryRequest;
using std::chrono::seconds;

const SystemTime kNow = FromEpochSeconds(1'800'000'000);

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  template <typename T>
  T Pick(std::initializer_list<T> values) {
    return *(values.begin() + Int(0, static_cast<int>(values.size()) - 1));
  }
  /// A time within `span` seconds before kNow.
  SystemTime Before(int span) { return kNow - seconds(Int(0, span)); }

 private:
  std::mt19937_64 rng_;
};

/// Instance ids of the snapshot ("i-snap<n>") can never collide with SequentialIdSource's
/// (i- and 17 hex digits), so a launch of one of them is a reuse.
std::string SnapId(int n) { return absl::StrCat("i-snap", n); }

void RandomRecovery(Gen& g, model::Node& n) {
  n.recovery = Request{g.Pick({Request::Action::kReboot, Request::Action::kReplace}),
                       g.Pick<std::string>({"", "requested by BatchRebootClusterNodes", "fault"}),
                       g.Before(120), g.Chance(0.3),
                       g.Pick({Request::Source::kApi, Request::Source::kSlurmAction,
                               Request::Source::kDead, Request::Source::kSoftwareFault})};
  if (g.Chance(0.5)) {
    n.recovery_progress.started_at = g.Before(900);
    n.recovery_progress.asked_at = g.Before(60);
    if (g.Chance(0.8)) n.recovery_progress.boot_time_before = g.Before(7200);
  }
  n.recovery_progress.reboot_instead = g.Chance(0.1);
}

void RandomFault(Gen& g, model::Node& n) {
  using K = model::NodeFault::Kind;
  n.fault = model::NodeFault{
      g.Pick({K::kDead, K::kUnresponsive, K::kHardwareFault, K::kSoftwareFault,
              K::kReplacementFailed}),
      "seen", g.Before(60), g.Chance(0.5) ? g.Before(30) : kNow + seconds(g.Int(1, 30))};
}

/// One node of group `group`, and (mostly) what the provider reports about it. A `calm` node
/// runs and is reported running, with no recovery, fault or marks (so that more plans settle).
void AddNode(Gen& g, ClusterSnapshot& snap, const std::string& group, int& next_id, bool calm) {
  model::Node n;
  n.cluster_id = snap.cluster.id;
  n.instance_id = SnapId(next_id++);
  n.logical_id = absl::StrCat(group, "-", next_id);
  n.group = group;
  n.instance_type = "ml.c5.xlarge";
  n.status = calm ? is::kRunning
                  : g.Pick({is::kPending, is::kRunning, is::kFailure, is::kShuttingDown});
  n.launch_time = g.Before(7200);
  n.revision = g.Int(1, 100);
  if (g.Chance(0.8)) {
    const int host = g.Int(2, 250);
    n.private_ip = absl::StrCat("10.1.0.", host);
    n.hostname = absl::StrCat("ip-10-1-0-", host);  // duplicates happen, as on replacement
  }
  if (snap.lifecycle_by_agent) {
    n.lifecycle_state = calm ? ls::kSucceeded
                             : g.Pick<std::string>({ls::kNone, ls::kWaiting, ls::kStarted,
                                                    ls::kSucceeded, ls::kSucceeded, ls::kFailed});
  }
  if (calm) {
    snap.instances.push_back({n.instance_id, n.cluster_id, InstanceState::kRunning, "",
                              n.private_ip, n.hostname, n.launch_time});
    if (snap.lifecycle_by_agent) snap.liveness[n.instance_id].last_heard = kNow;
    snap.nodes.push_back(std::move(n));
    return;
  }
  if (g.Chance(0.2)) RandomRecovery(g, n);
  if (g.Chance(0.15)) RandomFault(g, n);
  if (g.Chance(0.2)) {
    n.marks.replacement_of = g.Chance(0.5) && next_id > 2 ? SnapId(g.Int(0, next_id - 2))
                                                          : SnapId(1000 + next_id);
    n.marks.requested_ip = n.private_ip;
  }
  if (g.Chance(0.1)) n.marks.retry_of = SnapId(2000 + next_id);
  n.marks.replace_attempt = g.Int(1, 4);
  n.marks.slurm_down_pending = g.Chance(0.2);
  if (g.Chance(0.2)) n.marks.slurm_down_reasons = {"Hyperfleet: replacing it"};
  if (g.Chance(0.2)) n.recovered_at = g.Before(600);
  if (g.Chance(0.85)) {
    provider::InstanceObservation o;
    o.instance_id = n.instance_id;
    o.cluster_id = n.cluster_id;
    o.state = g.Pick({InstanceState::kPending, InstanceState::kRunning, InstanceState::kRunning,
                      InstanceState::kFailed, InstanceState::kTerminating});
    o.message = "provider says so";
    if (o.state == InstanceState::kRunning && g.Chance(0.9)) {
      o.private_ip = n.private_ip.empty() ? "10.1.1.9" : n.private_ip;
      o.hostname = n.hostname.empty() ? "ip-10-1-1-9" : n.hostname;
    }
    o.boot_time = g.Chance(0.8) ? g.Before(7200) : SystemTime{};
    snap.instances.push_back(o);
  }
  if (snap.lifecycle_by_agent && g.Chance(0.8)) {
    NodeLiveness& live = snap.liveness[n.instance_id];
    live.last_heard = g.Before(g.Chance(0.8) ? 8 : 60);
    if (g.Chance(0.2)) {
      using model::HealthSeverity;
      live.health = model::HealthReport{};
      live.health->verdict = g.Pick<HealthSeverity>(
          {HealthSeverity::kOk, HealthSeverity::kSoftFault, HealthSeverity::kHardFault});
      live.health->checked_at = g.Before(600);
      live.health->findings = {
          {"gpu", HealthSeverity::kHardFault, model::HealthAction::kReplace, "Xid"}};
    }
  }
  snap.nodes.push_back(std::move(n));
}

ClusterSnapshot RandomSnapshot(Gen& g) {
  ClusterSnapshot snap;
  model::Cluster& c = snap.cluster;
  c.id = "abcdefabcdef";
  c.name = "prop";
  c.revision = g.Int(1, 1000);
  c.status = g.Pick<std::string>({cs::kCreating, cs::kInService, cs::kInService, cs::kUpdating,
                                  cs::kRollingBack, cs::kFailed, cs::kDeleting});
  c.spec = json::object();
  if (g.Chance(0.3)) c.spec["NodeProvisioningMode"] = "Continuous";
  if (g.Chance(0.3)) c.spec["NodeRecovery"] = "None";
  const int groups = g.Int(1, 3);
  for (int k = 0; k < groups; ++k) c.groups.push_back(plan_test::Group(absl::StrCat("g", k), g.Int(0, 4)));
  if (g.Chance(0.2)) c.groups_deleting = {"gone"};
  snap.lifecycle_by_agent = g.Chance(0.5);
  if (snap.lifecycle_by_agent && g.Chance(0.5)) snap.controller_group = "g0";
  snap.liveness_policy.listening_since = g.Before(120);
  int next_id = 1;
  const bool calm = g.Chance(0.3);
  for (const auto& group : c.groups) {
    const int count = g.Int(0, group.target_count + 2);
    for (int k = 0; k < count; ++k) AddNode(g, snap, group.name, next_id, calm);
  }
  for (const auto& name : c.groups_deleting) {
    const int count = g.Int(0, 2);
    for (int k = 0; k < count; ++k) AddNode(g, snap, name, next_id, calm);
  }
  for (int k = g.Int(0, 2); k > 0; --k) {  // instances no record knows
    provider::InstanceObservation o;
    o.instance_id = SnapId(next_id++);
    o.cluster_id = c.id;
    o.state = g.Pick({InstanceState::kRunning, InstanceState::kTerminating});
    snap.instances.push_back(o);
  }
  if (snap.lifecycle_by_agent && g.Chance(0.6)) {
    snap.slurm_nodes.emplace();
    for (const auto& n : snap.nodes) {
      if (n.hostname.empty() || !g.Chance(0.7)) continue;
      snap.slurm_nodes->push_back(
          {n.hostname,
           g.Pick<std::string>({"idle", "alloc", "mixed", "down", "down*", "fail", "failing",
                                "drained", "idle+drain"}),
           g.Int(0, 1),
           g.Pick<std::string>({"", "Action:Replace", "Action:Reboot", "Hyperfleet: replacing it",
                                "Node unexpectedly rebooted", "maintenance"}),
           g.Before(900)});
    }
  }
  return snap;
}

// ---- printing (failure messages, and the determinism check) ----

std::string Time(SystemTime t) { return absl::StrCat(ToEpochSeconds(t) - ToEpochSeconds(kNow)); }

std::string Describe(const model::Node& n) {
  std::string out = absl::StrCat(n.instance_id, " ", n.group, " ", model::ToString(n.status),
                                 " \"", n.message, "\" launch=", Time(n.launch_time), " ip=",
                                 n.private_ip, " host=", n.hostname, " lcs=", n.lifecycle_state);
  if (n.recovery) {
    absl::StrAppend(&out, " recovery=", model::ToString(n.recovery->action),
                    n.recovery->hard ? "(hard)" : "", "/", model::ToString(n.recovery->source));
    const auto& p = n.recovery_progress;
    if (p.started_at) absl::StrAppend(&out, " started=", Time(*p.started_at));
    if (p.asked_at) absl::StrAppend(&out, " asked=", Time(*p.asked_at));
    if (p.boot_time_before) absl::StrAppend(&out, " boot_before=", Time(*p.boot_time_before));
    if (p.reboot_instead) absl::StrAppend(&out, " reboot_instead");
  }
  if (n.fault) {
    absl::StrAppend(&out, " fault=", model::ToString(n.fault->kind), " retry=",
                    Time(n.fault->retry_at));
  }
  const auto& m = n.marks;
  if (!m.replacement_of.empty()) absl::StrAppend(&out, " replaces=", m.replacement_of);
  if (!m.retry_of.empty()) absl::StrAppend(&out, " retries=", m.retry_of);
  if (!m.requested_ip.empty()) absl::StrAppend(&out, " wants_ip=", m.requested_ip);
  absl::StrAppend(&out, " attempt=", m.replace_attempt, m.slurm_down_pending ? " down_pending" : "",
                  " down_reasons=", m.slurm_down_reasons.size());
  if (n.recovered_at != SystemTime{}) absl::StrAppend(&out, " recovered=", Time(n.recovered_at));
  return out;
}

std::string Describe(const ClusterSnapshot& s) {
  std::ostringstream out;
  out << "cluster " << s.cluster.status << " spec=" << s.cluster.spec.dump()
      << " agents=" << s.lifecycle_by_agent << " controller_group=" << s.controller_group << "\n";
  for (const auto& g : s.cluster.groups) out << "  group " << g.name << " target " << g.target_count << "\n";
  for (const auto& g : s.cluster.groups_deleting) out << "  deleting group " << g << "\n";
  for (const auto& n : s.nodes) out << "  node " << Describe(n) << "\n";
  for (const auto& o : s.instances) {
    out << "  instance " << o.instance_id << " state=" << static_cast<int>(o.state)
        << " ip=" << o.private_ip << " boot=" << Time(o.boot_time) << "\n";
  }
  for (const auto& [id, l] : s.liveness) {
    out << "  heard " << id << " at " << Time(l.last_heard) << " health="
        << (l.health ? model::ToString(l.health->verdict) + " at " + Time(l.health->checked_at)
                     : std::string("none"))
        << "\n";
  }
  if (s.slurm_nodes) {
    for (const auto& n : *s.slurm_nodes) {
      out << "  slurm " << n.name << " " << n.state << " \"" << n.reason << "\" at "
          << Time(n.reason_time) << "\n";
    }
  }
  return out.str();
}

std::string Describe(const ClusterPlan& p) {
  std::ostringstream out;
  auto list = [&](const char* name, const std::vector<std::string>& ids) {
    out << name << ":";
    for (const auto& id : ids) out << " " << id;
    out << "\n";
  };
  for (const auto& w : p.writes.clusters) {
    out << "cluster write " << w.cluster.status << " \"" << w.cluster.failure_message
        << "\" expected=" << w.expected_revision << (w.erase ? " erase" : "") << "\n";
  }
  for (const auto& w : p.writes.nodes) {
    out << "node write " << Describe(w.node) << " expected=" << w.expected_revision
        << (w.erase ? " erase" : "") << "\n";
  }
  for (const auto& e : p.writes.events) out << "event " << e.id << " " << e.description << "\n";
  out << "launches:";
  for (const auto& l : p.launches) out << " " << l.instance_id << "@" << l.private_ip;
  out << "\n";
  list("terminations", p.terminations);
  list("kills", p.kills);
  list("reboots", p.reboots);
  list("hard_reboots", p.hard_reboots);
  for (const auto& m : p.slurm_marks) out << "slurm " << m.node << " " << m.action << " " << m.reason << "\n";
  out << "watch=" << p.watch_liveness << " settled=" << p.settled << " notice=" << p.notice << "\n";
  return out.str();
}

// ---- invariants ----

bool Has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

/// The invariants of one plan for one snapshot, a method per group of them; `bad`
/// collects the violated ones.
struct InvariantCheck {
  const ClusterSnapshot& snap;
  const ClusterPlan& plan;
  std::vector<std::string> bad;
  std::map<std::string, const model::Node*> before;
  std::map<std::string, const provider::InstanceObservation*> reported;
  std::map<std::string, model::Node> after;  // node records after the plan's writes
  std::set<std::string> created;             // records the plan creates
  std::string status;                        // the cluster's status after the plan

  InvariantCheck(const ClusterSnapshot& s, const ClusterPlan& p) : snap(s), plan(p) {
    for (const auto& n : snap.nodes) before[n.instance_id] = &n;
    for (const auto& o : snap.instances) reported[o.instance_id] = &o;
  }
  void check(bool ok, std::string what) {
    if (!ok) bad.push_back(std::move(what));
  }

  void writesAndFence() {
    for (const auto& n : snap.nodes) after[n.instance_id] = n;
    std::set<std::string> written;
    for (const auto& w : plan.writes.nodes) {
      const std::string& id = w.node.instance_id;
      check(written.insert(id).second, "node " + id + " written twice");
      if (before.count(id)) {
        check(w.expected_revision == before[id]->revision, "write of " + id + " not fenced");
      } else {
        check(w.expected_revision == store::kMustNotExist, "new " + id + " may overwrite");
        check(!reported.count(id), "new record " + id + " reuses a provider instance's id");
        check(!w.erase, "erase of unknown " + id);
        // Pending; or ShuttingDown, never launched, when a replacement made in this pass is
        // scaled away in the same pass.
        check(w.node.status == is::kPending ||
                  (w.node.status == is::kShuttingDown &&
                   std::none_of(plan.launches.begin(), plan.launches.end(),
                                [&](const auto& l) { return l.instance_id == id; })),
              "new " + id + " is neither Pending nor an unlaunched ShuttingDown");
        created.insert(id);
      }
      if (w.erase) {
        after.erase(id);
      } else {
        after[id] = w.node;
      }
    }
    // Erasing the cluster erases its node records.
    if (!plan.writes.clusters.empty() && plan.writes.clusters[0].erase) after.clear();
    status = plan.writes.clusters.empty() ? snap.cluster.status
                                          : plan.writes.clusters[0].cluster.status;
    // Writes are fenced by the cluster's revision.
    if (!plan.writes.nodes.empty() || !plan.writes.events.empty()) {
      check(plan.writes.clusters.size() == 1 &&
                plan.writes.clusters[0].expected_revision == snap.cluster.revision,
            "node writes or events without the cluster's fence");
    }
  }

  void events() {
    std::set<std::string> event_ids;
    for (const auto& e : plan.writes.events) {
      check(event_ids.insert(e.id).second, "event id " + e.id + " twice");
      check(e.cluster_id == snap.cluster.id && e.time == kNow, "event " + e.id + " misattributed");
    }

  }

  void launchesAndDeleting() {
    // Launches: a new record's id (never one of the snapshot's or another launch's), or a
    // relaunch of a Pending record the provider does not report (launch is idempotent by id).
    std::set<std::string> launched;
    for (const auto& l : plan.launches) {
      check(launched.insert(l.instance_id).second, "launch " + l.instance_id + " twice");
      if (before.count(l.instance_id)) {
        check(before[l.instance_id]->status == is::kPending && !reported.count(l.instance_id),
              "launch reuses " + l.instance_id);
      } else {
        check(created.count(l.instance_id) > 0, "launch " + l.instance_id + " has no record");
        check(!reported.count(l.instance_id), "launch reuses provider id " + l.instance_id);
      }
      // (A relaunched record that this pass scales away is launched and terminated alike.)
      check(!created.count(l.instance_id) ||
                (!Has(plan.terminations, l.instance_id) && !Has(plan.kills, l.instance_id)),
            "new " + l.instance_id + " is launched and terminated");
    }
    if (snap.cluster.status == cs::kDeleting) {
      check(plan.launches.empty(), "a Deleting cluster launches");
      for (const auto& [id, n] : after) {
        check(n.status == is::kShuttingDown, "Deleting cluster keeps " + id + " live");
      }
    }

  }

  void stoppingAndUnknown() {
    // Every ShuttingDown record the provider still runs was asked to terminate (in this plan,
    // or the provider is terminating it); one it no longer reports is erased, unless this
    // plan just asked for it.
    std::set<std::string> stopping;
    for (const auto& id : plan.terminations) {
      check(stopping.insert(id).second, "terminate " + id + " twice");
    }
    for (const auto& id : plan.kills) check(stopping.insert(id).second, "kill " + id + " twice");
    for (const auto& [id, n] : after) {
      if (n.status != is::kShuttingDown) continue;
      auto o = reported.find(id);
      if (o != reported.end()) {
        check(stopping.count(id) || o->second->state == InstanceState::kTerminating,
              "ShuttingDown " + id + " was never asked to terminate");
      } else {
        check(created.count(id) || Has(plan.terminations, id),
              "ShuttingDown " + id + " is gone from its provider but not erased");
      }
    }
    // Instances no record knows are terminated.
    for (const auto& o : snap.instances) {
      if (!before.count(o.instance_id) && o.state != InstanceState::kTerminating) {
        check(Has(plan.terminations, o.instance_id), "unknown " + o.instance_id + " left running");
      }
    }

  }

  void replacements() {
    // A replacement keeps its predecessor's NodeLogicalId and group; the predecessor goes.
    for (const auto& id : created) {
      if (!after.count(id)) continue;
      const model::Node& r = after[id];
      auto pred = before.find(r.marks.replacement_of);
      if (pred == before.end()) continue;  // a new node of a group, or a retry
      check(r.logical_id == pred->second->logical_id && r.group == pred->second->group,
            "replacement " + id + " changed its NodeLogicalId or group");
      check(!after.count(pred->first) || after[pred->first].status == is::kShuttingDown,
            "replaced " + pred->first + " stays live");
    }

  }

  void settledState() {
    // Settled: nothing in flight, a final status, and (unless Failed, whose instances are
    // kept as they were) no group above its target.
    if (plan.settled) {
      check(status == cs::kInService || status == cs::kFailed, "settled while " + status);
      check(plan.launches.empty() && plan.terminations.empty() && plan.kills.empty(),
            "settled with provider calls");
      std::map<std::string, int> live;
      for (const auto& [id, n] : after) {
        check(n.status != is::kPending && n.status != is::kShuttingDown,
              "settled with " + id + " " + model::ToString(n.status));
        ++live[n.group];
      }
      if (status != cs::kFailed) {
        const auto& groups = plan.writes.clusters.empty() ? snap.cluster.groups
                                                          : plan.writes.clusters[0].cluster.groups;
        for (const auto& g : groups) {
          check(live[g.name] <= g.target_count,
                absl::StrCat("settled with ", live[g.name], " live nodes in ", g.name,
                             " (target ", g.target_count, ")"));
        }
      }
    }
  }
};

/// The violated invariants of `plan` for `snap` (empty when all hold).
std::vector<std::string> Violations(const ClusterSnapshot& snap, const ClusterPlan& plan) {
  InvariantCheck c(snap, plan);
  c.writesAndFence();
  c.events();
  c.launchesAndDeleting();
  c.stoppingAndUnknown();
  c.replacements();
  c.settledState();
  return std::move(c.bad);
}

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

TEST(ClusterPlanProperty, InvariantsHoldForRandomSnapshots) {
  const uint64_t seed = EnvOr("HF_PROP_SEED", std::random_device{}());
  const uint64_t cases = EnvOr("HF_PROP_CASES", 3000);
  std::cout << "seed " << seed << " (HF_PROP_SEED=" << seed << " replays it)\n";
  Gen g(seed);
  // How often each invariant had something to check: a generator that stopped reaching a
  // case would make its invariant vacuous.
  std::map<std::string, int> seen;
  for (uint64_t k = 0; k < cases; ++k) {
    const ClusterSnapshot snap = RandomSnapshot(g);
    SequentialIdSource ids(7), again(7);
    const ClusterPlan plan = PlanCluster(snap, kNow, ids);
    seen["settled"] += plan.settled;
    seen["settled, not Failed"] += plan.settled && snap.cluster.status != cs::kFailed;
    seen["launches"] += !plan.launches.empty();
    seen["kills"] += !plan.kills.empty();
    seen["deleting"] += snap.cluster.status == cs::kDeleting;
    seen["cluster erased"] += !plan.writes.clusters.empty() && plan.writes.clusters[0].erase;
    seen["replacements"] += std::any_of(plan.writes.nodes.begin(), plan.writes.nodes.end(),
                                        [](const store::NodeWrite& w) {
                                          return w.expected_revision == store::kMustNotExist &&
                                                 !w.node.marks.replacement_of.empty();
                                        });
    const std::vector<std::string> bad = Violations(snap, plan);
    // Pure: the same snapshot, time and ids give the same plan.
    const std::string text = Describe(plan);
    const bool same = Describe(PlanCluster(snap, kNow, again)) == text;
    if (!bad.empty() || !same) {
      std::string why;
      for (const auto& b : bad) absl::StrAppend(&why, "  ", b, "\n");
      if (!same) why += "  planning twice gave different plans\n";
      FAIL() << "seed " << seed << ", case " << k << ":\n"
             << why << "snapshot:\n" << Describe(snap) << "plan:\n" << text;
    }
  }
  for (const auto& [what, count] : seen) {
    std::cout << "  " << what << ": " << count << " of " << cases << "\n";
    if (cases >= 1000) {
      EXPECT_GT(count, 0) << what << " never occurred";
    }
  }
}

}  // namespace
}  // namespace hf::control
