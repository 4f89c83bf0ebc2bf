// The invariant checker. Deliberately written apart from the engine (engine_impl.h): its
// quota arithmetic is the "lending" formulation of the same rules (what borrowers use ≤ what
// lenders leave idle), not the engine's available()/potential() tree, so that a shared mistake is
// unlikely. Its incremental tallies are its own, fed only by the events and decisions it is
// told, and Recount() re-derives them from scratch.
//
// Which checks look only at what a cycle touched, and why that is sound:
//  1, 2  capacity and lending: they can only break when a team's usage grows, i.e. at an
//        admission; quota decreases may leave a team or the cohort over (allowed, nothing
//        is evicted), so they are checked at each admission on the admitted team and type
//        (cohort sums from the per-type tallies, O(1)), exactly as a full scan would.
//  3     conservation: compared with the engine on every team and type whose usage the
//        checker changed this cycle (admissions, victims) or since the last cycle
//        (releases); an engine change to another team would go unseen there, so a full
//        check compares every team and type.
//  4-7   ordering, preemption legality, minimality, ping-pong: properties of one admission
//        and its own queue, victims and shares; shares use the tallies (O(types)).
//  8     lender reclaim: whether a pending job fits its team's unused nominal depends only
//        on that team's quota, its usage of the type and the jobs in that queue; a queue
//        none of which changed since it was last checked gives the same answer (a
//        violation that persists is reported when it appears). Queues with a job evicted
//        in this cycle (exempt in the cycle) are checked again in the next one. Quota and
//        policy changes make every queue due. A full check looks at every queue.
//  11,13 gangs whole and disabled teams: per admission.
#include "hyperfleet/governance/checker.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "absl/strings/str_cat.h"

namespace hf::governance {

namespace {
constexpr int kR = 3;

int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

struct Totals {
  std::atomic<int64_t> cycles{0}, full_checks{0}, recounts{0}, queues_checked{0}, cpu_ns{0};
};
Totals& ProcessTotalsStore() {
  static Totals t;
  return t;
}
}  // namespace

InvariantChecker::Stats InvariantChecker::ProcessTotals() {
  const Totals& t = ProcessTotalsStore();
  Stats s;
  s.cycles = t.cycles.load();
  s.full_checks = t.full_checks.load();
  s.recounts = t.recounts.load();
  s.queues_checked = t.queues_checked.load();
  s.cpu_ns = t.cpu_ns.load();
  return s;
}

InvariantChecker::InvariantChecker(std::vector<InstanceTypeCapacity> types,
                                   SchedulerPolicy policy)
    : policy_(std::move(policy)) {
  for (auto& t : types) {
    auto [it, fresh] = type_index_.emplace(t.name, static_cast<int>(types_.size()));
    if (!fresh) {
      types_[it->second] = t;  // a repeated name: the last one wins
      continue;
    }
    types_.push_back(t);
  }
  for (const auto& it : types_) {
    Amount cap;
    cap.a[0] = int64_t{it.accelerators} * it.instances;
    cap.a[1] = int64_t{it.vcpus} * 1000 * it.instances;
    cap.a[2] = static_cast<int64_t>(std::round(it.memory_gib * 1024.0)) * it.instances;
    capacity_.push_back(cap);
  }
  tally_.resize(types_.size());
}

int InvariantChecker::TypeIndex(const std::string& name) const {
  auto it = type_index_.find(name);
  if (it == type_index_.end()) throw std::out_of_range("unknown instance type " + name);
  return it->second;
}

int InvariantChecker::TeamIndex(const std::string& name) {
  auto [it, fresh] = team_index_.emplace(name, static_cast<int>(teams_.size()));
  if (fresh) {
    // A team without a quota contributes nothing to the tallies.
    Quota q;
    q.name = name;
    const size_t n = types_.size();
    q.has_nominal.assign(n, 0);
    q.nominal.resize(n);
    q.borrow.resize(n);
    q.usage.resize(n);
    q.queue.resize(n);
    q.flags.assign(n, 0);
    teams_.push_back(std::move(q));
  }
  return it->second;
}

void InvariantChecker::SetPolicy(const SchedulerPolicy& policy) {
  policy_ = policy;
  // Jobs follow their class by name to its new weight; a job whose class is gone drops to
  // priority 0 for good (the engine's rule, docs/governance.md).
  for (auto& [id, j] : jobs_) {
    if (j.cls.empty()) continue;
    bool found = false;
    for (const auto& pc : policy_.priority_classes)
      if (pc.name == j.cls || pc.name + "-priority" == j.cls) found = true;
    if (!found) j.cls.clear();
    j.prio = PriorityOf(j.cls);
  }
  ConfigChanged();
}

// A configuration change may make never-fit jobs fit: they are pending again, and every
// queue is due for the lender-reclaim check.
void InvariantChecker::ConfigChanged() {
  ++changes_;
  for (auto& [id, j] : jobs_)
    if (j.state == 2) j.state = 0;
  all_dirty_ = true;
}

int InvariantChecker::PriorityOf(const std::string& cls) const {
  for (const auto& pc : policy_.priority_classes)
    if (pc.name == cls || pc.name + "-priority" == cls) return pc.weight;
  return 0;
}

// One instance type's quota entry in accelerators, milli-vCPU and MiB (HyperPod's Count or
// ratio fill; explicit fields win).
InvariantChecker::Amount InvariantChecker::Converted(const QuotaResource& q) const {
  const InstanceTypeCapacity& it = types_[TypeIndex(q.instance_type)];
  const double inst[kR] = {static_cast<double>(it.accelerators), it.vcpus * 1000.0,
                           std::round(it.memory_gib * 1024.0)};
  Amount out;
  double frac = -1;
  if (q.count) {
    for (int r = 0; r < kR; ++r) out.a[r] = *q.count * static_cast<int64_t>(inst[r]);
  } else if (q.accelerators) {
    frac = inst[0] > 0 ? *q.accelerators / inst[0] : 0;
    out.a[1] = static_cast<int64_t>(frac * inst[1]);
    out.a[2] = static_cast<int64_t>(frac * inst[2]);
  } else if (q.vcpu) {
    frac = inst[1] > 0 ? *q.vcpu * 1000 / inst[1] : 0;
    out.a[2] = static_cast<int64_t>(frac * inst[2]);
  } else if (q.memory_gib) {
    frac = inst[2] > 0 ? *q.memory_gib * 1024 / inst[2] : 0;
    out.a[1] = static_cast<int64_t>(frac * inst[1]);
  }
  if (q.accelerators) out.a[0] = static_cast<int64_t>(std::floor(*q.accelerators));
  if (q.vcpu) out.a[1] = static_cast<int64_t>(std::floor(*q.vcpu * 1000));
  if (q.memory_gib) out.a[2] = static_cast<int64_t>(std::floor(*q.memory_gib * 1024));
  return out;
}

// Replaces a team's quota (nullptr: deletes it), taking its old contribution out of the
// tallies and putting the new one in.
void InvariantChecker::SetConfig(int team, const TeamQuota* q) {
  // Convert first: an unknown type throws before anything changed.
  std::vector<std::pair<int, Amount>> nominal, absolute;
  if (q) {
    for (const auto& qr : q->resources) nominal.emplace_back(TypeIndex(qr.instance_type), Converted(qr));
    for (const auto& qr : q->absolute_borrow_limits)
      absolute.emplace_back(TypeIndex(qr.instance_type), Converted(qr));
  }
  Quota& t = teams_[team];
  for (size_t ty = 0; ty < types_.size(); ++ty)
    Contribute(tally_[ty], team, static_cast<int>(ty), t.usage[ty], -1);
  std::fill(t.has_nominal.begin(), t.has_nominal.end(), 0);
  std::fill(t.nominal.begin(), t.nominal.end(), Amount{});
  std::fill(t.borrow.begin(), t.borrow.end(), Amount{});
  t.exists = q != nullptr;
  if (q) {
    t.active = q->active;
    t.strategy = q->strategy;
    t.preempt = q->preempt_team_tasks;
    t.weight = q->fair_share_weight;
    for (const auto& [ty, n] : nominal) {
      t.has_nominal[ty] = 1;
      t.nominal[ty] = n;
      Amount b;
      if (q->strategy == SharingStrategy::kLendAndBorrow)
        for (int r = 0; r < kR; ++r) b.a[r] = n.a[r] * q->borrow_limit_percent / 100;
      t.borrow[ty] = b;
    }
    if (q->strategy == SharingStrategy::kLendAndBorrow) {
      for (size_t i = 0; i < absolute.size(); ++i) {
        const QuotaResource& qr = q->absolute_borrow_limits[i];
        const Amount& abs = absolute[i].second;
        Amount& b = t.borrow[absolute[i].first];
        if (qr.count || qr.accelerators) b.a[0] = abs.a[0];
        if (qr.count || qr.vcpu) b.a[1] = abs.a[1];
        if (qr.count || qr.memory_gib) b.a[2] = abs.a[2];
      }
    }
  }
  for (size_t ty = 0; ty < types_.size(); ++ty)
    Contribute(tally_[ty], team, static_cast<int>(ty), t.usage[ty], +1);
}

void InvariantChecker::UpsertQuota(const TeamQuota& q) {
  ConfigChanged();
  SetConfig(TeamIndex(q.team), &q);
}

void InvariantChecker::RemoveQuota(const std::string& team) {
  ConfigChanged();
  SetConfig(TeamIndex(team), nullptr);
}

void InvariantChecker::Submitted(const WorkloadSpec& s) {
  Job j;
  j.type = TypeIndex(s.instance_type);
  j.team = TeamIndex(s.team);
  const InstanceTypeCapacity& it = types_[j.type];
  const int64_t inst[kR] = {it.accelerators, int64_t{it.vcpus} * 1000,
                            static_cast<int64_t>(std::round(it.memory_gib * 1024.0))};
  for (int r = 0; r < kR; ++r) j.req.a[r] = (s.per_pod ? (*s.per_pod)[r] : inst[r]) * s.count;
  j.prio = PriorityOf(s.priority_class);
  j.cls = s.priority_class;
  j.ts = s.submit_time_ms;
  jobs_[s.id] = j;
  Quota& q = teams_[j.team];
  ++q.pending;
  q.queue[j.type].insert(s.id);
  Mark(j.team, j.type, kReclaimDirty);
}

void InvariantChecker::Removed(uint64_t id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Fail(absl::StrCat("removed unknown job ", id));
  const Job& j = it->second;
  if (j.state == 1) {
    Add(j.team, j.type, j.req, -1);
    --admitted_;
    ++changes_;
  } else {
    --teams_[j.team].pending;
  }
  teams_[j.team].queue[j.type].erase(id);
  Mark(j.team, j.type, kReclaimDirty);
  jobs_.erase(it);
}

void InvariantChecker::Fail(std::string msg) {
  ++violations_;
  if (messages_.size() < 50) messages_.push_back(absl::StrCat("cycle ", cycle_, ": ", msg));
}

void InvariantChecker::Mark(int team, int type, uint8_t flags) {
  uint8_t& f = teams_[team].flags[type];
  if (f == 0) dirty_.emplace_back(team, type);
  f |= flags;
}

InvariantChecker::Amount InvariantChecker::NominalOf(int team, int type) const {
  const Quota& t = teams_[team];
  if (!t.exists || !t.active) return {};
  return t.nominal[type];
}

InvariantChecker::Amount InvariantChecker::BorrowOf(int team, int type) const {
  const Quota& t = teams_[team];
  if (!t.exists || !t.active) return {};
  return t.borrow[type];
}

bool InvariantChecker::Lends(int team) const {
  const Quota& t = teams_[team];
  return t.exists && t.active && t.strategy != SharingStrategy::kDontLend;
}

// Adds (sign +1) or takes out (-1) one team's share of a type's cohort sums at `usage`.
void InvariantChecker::Contribute(Tally& t, int team, int type, const Amount& usage,
                                  int sign) const {
  const Amount n = NominalOf(team, type);
  const bool lends = Lends(team);
  for (int r = 0; r < kR; ++r) {
    t.borrowed[r] += sign * std::max<int64_t>(0, usage.a[r] - n.a[r]);
    if (lends) {
      t.idle[r] += sign * std::max<int64_t>(0, n.a[r] - usage.a[r]);
      t.lendable[r] += sign * n.a[r];
    }
    t.nominal_sum[r] += sign * n.a[r];
  }
}

void InvariantChecker::Add(int team, int type, const Amount& req, int sign) {
  Quota& q = teams_[team];
  Amount& u = q.usage[type];
  Contribute(tally_[type], team, type, u, -1);
  bool negative = false;
  for (int r = 0; r < kR; ++r) {
    u.a[r] += sign * req.a[r];
    negative |= u.a[r] < 0;
  }
  Contribute(tally_[type], team, type, u, +1);
  if (negative) Fail(absl::StrCat("negative usage of ", q.name, " on ", types_[type].name));
  Mark(team, type, kUsageDirty | kReclaimDirty);
}

int64_t InvariantChecker::IdleCapacity(int type, int r) const {
  if (!policy_.idle_resource_sharing) return 0;
  return std::max<int64_t>(0, capacity_[type].a[r] - tally_[type].nominal_sum[r]);
}

// Borrowers use no more than lenders leave idle (plus unallocated capacity when
// IdleResourceSharing is on): Σ max(0, usage − nominal) ≤ Σ_lenders max(0, nominal − usage)
// + idle. DontLend teams are no lenders.
bool InvariantChecker::CohortOk(int type) const { return CohortExcess(type, nullptr) <= 0; }

int64_t InvariantChecker::CohortExcess(int type, std::string* why) const {
  const Tally& t = tally_[type];
  int64_t worst = std::numeric_limits<int64_t>::min();
  for (int r = 0; r < kR; ++r) {
    const int64_t idle = t.idle[r] + IdleCapacity(type, r);
    if (t.borrowed[r] > idle && why)
      *why = absl::StrCat(types_[type].name, " resource ", r, ": borrowed ", t.borrowed[r],
                          " > lendable idle ", idle);
    worst = std::max(worst, t.borrowed[r] - idle);
  }
  return worst;
}

bool InvariantChecker::TeamOk(int team, int type, const Amount& req, std::string* why) const {
  const Amount n = NominalOf(team, type), b = BorrowOf(team, type);
  const Amount& u = teams_[team].usage[type];
  for (int r = 0; r < kR; ++r) {
    if (req.a[r] > 0 && u.a[r] > n.a[r] + b.a[r]) {
      if (why)
        *why = absl::StrCat(teams_[team].name, " on ", types_[type].name, " resource ", r,
                            ": usage ", u.a[r], " > nominal ", n.a[r], " + borrow limit ",
                            b.a[r]);
      return false;
    }
  }
  return true;
}

// Dominant borrowed share of `team` (with `delta` on `type`; -1: none) ÷ weight; zero-weight
// borrowers rank above every weighted one (1e12 + unweighted share).
std::pair<int, double> InvariantChecker::ShareRank(int team, int type,
                                                  const Amount& delta) const {
  double lendable[kR] = {0, 0, 0};
  for (size_t ty = 0; ty < types_.size(); ++ty)
    for (int r = 0; r < kR; ++r)
      lendable[r] += static_cast<double>(tally_[ty].lendable[r] +
                                         IdleCapacity(static_cast<int>(ty), r));
  const Quota& q = teams_[team];
  std::pair<int, double> best{0, 0.0};
  for (int r = 0; r < kR; ++r) {
    int64_t borrowed = 0;
    for (size_t ty = 0; ty < types_.size(); ++ty) {
      int64_t u = q.usage[ty].a[r];
      if (static_cast<int>(ty) == type) u += delta.a[r];
      borrowed += std::max<int64_t>(0, u - NominalOf(team, static_cast<int>(ty)).a[r]);
    }
    if (borrowed <= 0) continue;
    // Borrowing what nobody lends (quota lowered or deleted under running jobs) is an
    // infinite share; such shares rank among themselves by the amount borrowed.
    const std::pair<int, double> s =
        lendable[r] > 0 ? std::pair<int, double>{0, borrowed / lendable[r]}
                        : std::pair<int, double>{1, static_cast<double>(borrowed)};
    best = std::max(best, s);
  }
  if (best.second == 0) return {0, 0.0};
  // Weight 0 ranks above every weighted share and, unweighted, among the other zero weights.
  if (q.weight == 0) return {best.first + 1, best.second};
  return {best.first, best.second / q.weight};
}

double InvariantChecker::Share(int team, int type, const Amount& delta) const {
  const auto [tier, value] = ShareRank(team, type, delta);
  return tier == 0 ? value : 1e12 * tier + value;
}

bool InvariantChecker::FitsUnusedNominal(const WorkloadSpec& s) const {
  auto ti = team_index_.find(s.team);
  auto yi = type_index_.find(s.instance_type);
  if (ti == team_index_.end() || yi == type_index_.end()) return false;
  const int team = ti->second, type = yi->second;
  const Quota& t = teams_[team];
  if (!t.exists || !t.active || !t.has_nominal[type]) return false;
  auto j = jobs_.find(s.id);
  if (j == jobs_.end()) return false;
  const Amount n = NominalOf(team, type), u = t.usage[type];
  for (int r = 0; r < kR; ++r)
    if (j->second.req.a[r] > 0 && u.a[r] + j->second.req.a[r] > n.a[r]) return false;
  return true;
}

// Lender reclaim on one queue: no pending job fits its team's unused nominal quota. Only a
// team with unused nominal quota on the type needs a look at its jobs.
void InvariantChecker::CheckReclaim(int team, int type) {
  ++stats_.queues_checked;
  const Quota& q = teams_[team];
  const std::set<uint64_t>& ids = q.queue[type];
  if (ids.empty() || !q.exists || !q.active || !q.has_nominal[type]) return;
  const Amount n = NominalOf(team, type), u = q.usage[type];
  bool room = false;
  for (int r = 0; r < kR; ++r) room |= n.a[r] > u.a[r];
  if (!room) return;
  for (uint64_t id : ids) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;  // Recount reports a queue out of step with the jobs
    const Job& j = it->second;
    if (j.state != 0 || j.evicted_cycle == cycle_) continue;
    bool fits = true;
    for (int r = 0; r < kR; ++r)
      if (j.req.a[r] > 0 && u.a[r] + j.req.a[r] > n.a[r]) fits = false;
    if (fits)
      Fail(absl::StrCat("job ", id, " of ", q.name, " fits the team's unused nominal quota "
                        "but stays pending"));
  }
}

bool InvariantChecker::Recount() {
  ++stats_.recounts;
  ++ProcessTotalsStore().recounts;
  const int64_t before = violations_;
  const size_t nt = types_.size();
  std::vector<std::vector<Amount>> usage(teams_.size(), std::vector<Amount>(nt));
  std::vector<int64_t> pending(teams_.size(), 0);
  int64_t admitted = 0, waiting = 0;
  bool queues_ok = true;
  for (const auto& [id, j] : jobs_) {
    if (j.state == 1) {
      for (int r = 0; r < kR; ++r) usage[j.team][j.type].a[r] += j.req.a[r];
      ++admitted;
    } else {
      ++pending[j.team];
      ++waiting;
      if (!teams_[j.team].queue[j.type].contains(id)) queues_ok = false;
    }
  }
  int64_t queued = 0;
  for (const Quota& q : teams_)
    for (const auto& ids : q.queue) queued += static_cast<int64_t>(ids.size());
  // Every job not admitted is in its queue and the queues hold nothing else.
  if (!queues_ok || queued != waiting) {
    Fail(absl::StrCat("recount: the queues hold ", queued, " jobs, ", waiting,
                      " are not admitted", queues_ok ? "" : ", and some are missing"));
    for (Quota& q : teams_)
      for (auto& ids : q.queue) ids.clear();
    for (const auto& [id, j] : jobs_)
      if (j.state != 1) teams_[j.team].queue[j.type].insert(id);
  }
  if (admitted != admitted_)
    Fail(absl::StrCat("recount: ", admitted, " jobs hold quota, incremental count ", admitted_));
  admitted_ = admitted;
  for (size_t t = 0; t < teams_.size(); ++t) {
    Quota& q = teams_[t];
    if (q.pending != pending[t])
      Fail(absl::StrCat("recount: ", q.name, " has ", pending[t],
                        " jobs not admitted, incremental count ", q.pending));
    q.pending = pending[t];
    for (size_t ty = 0; ty < nt; ++ty)
      for (int r = 0; r < kR; ++r)
        if (q.usage[ty].a[r] != usage[t][ty].a[r])
          Fail(absl::StrCat("recount: usage of ", q.name, " on ", types_[ty].name,
                            " resource ", r, ": incremental ", q.usage[ty].a[r],
                            ", sum of admitted ", usage[t][ty].a[r]));
    q.usage = std::move(usage[t]);
  }
  std::vector<Tally> fresh(nt);
  for (size_t t = 0; t < teams_.size(); ++t)
    for (size_t ty = 0; ty < nt; ++ty)
      Contribute(fresh[ty], static_cast<int>(t), static_cast<int>(ty), teams_[t].usage[ty], +1);
  for (size_t ty = 0; ty < nt; ++ty) {
    const Tally &a = tally_[ty], &b = fresh[ty];
    for (int r = 0; r < kR; ++r) {
      const std::pair<const char*, std::pair<int64_t, int64_t>> sums[] = {
          {"borrowed", {a.borrowed[r], b.borrowed[r]}},
          {"idle", {a.idle[r], b.idle[r]}},
          {"nominal sum", {a.nominal_sum[r], b.nominal_sum[r]}},
          {"lendable", {a.lendable[r], b.lendable[r]}}};
      for (const auto& [what, v] : sums)
        if (v.first != v.second)
          Fail(absl::StrCat("recount: ", what, " of ", types_[ty].name, " resource ", r,
                            ": incremental ", v.first, ", recount ", v.second));
    }
  }
  tally_ = std::move(fresh);
  if (violations_ != before) all_dirty_ = true;  // re-check every queue on the recount
  return violations_ == before;
}

// One cycle: the steps are in checker_cycle.cc.
void InvariantChecker::CheckCycle(const CycleResult& res, const Engine& engine, bool full) {
  const int64_t cpu0 = ThreadCpuNs();
  const Stats stats0 = stats_;
  ++cycle_;
  ++stats_.cycles;
  CycleNotes notes;
  notes.evicted_types.assign(types_.size(), 0);
  for (const Admission& a : res.admitted) CheckAdmission(a, notes);
  CheckNeverFits(res.never_fits);
  if (full) {
    ++stats_.full_checks;
    Recount();
  }
  const bool every_queue = full || all_dirty_;
  CompareUsage(engine, full);
  CheckDueQueues(every_queue, notes);
  CheckOrdering(notes);
  // Nothing holds quota any more (the end of a trace): recount once more, cheaply.
  if (!full && admitted_ == 0) Recount();
  stats_.cpu_ns += ThreadCpuNs() - cpu0;
  Totals& g = ProcessTotalsStore();
  g.cycles += stats_.cycles - stats0.cycles;
  g.full_checks += stats_.full_checks - stats0.full_checks;
  g.queues_checked += stats_.queues_checked - stats0.queues_checked;
  g.cpu_ns += stats_.cpu_ns - stats0.cpu_ns;
}

std::vector<InvariantChecker::TeamView> InvariantChecker::Teams() const {
  std::vector<TeamView> out;
  out.reserve(team_index_.size());
  for (const auto& [name, idx] : team_index_) {
    const Quota& t = teams_[idx];
    out.push_back({name, t.weight, t.exists && t.active, t.exists ? Share(idx, -1, {}) : 0,
                   t.pending});
  }
  return out;
}

}  // namespace hf::governance
