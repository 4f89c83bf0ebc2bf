// The invariant checker itself: its per-cycle fast path (incremental tallies, only the
// queues a cycle touched) still catches forged violations, and its from-scratch recount
// catches a corrupted incremental tally that the fast path cannot see.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "hyperfleet/governance/checker.h"
#include "hyperfleet/governance/trace.h"

namespace hf::governance {

// Reaches into the checker's incremental state to corrupt it, as a bug in the incremental
// path would.
struct CheckerTestPeer {
  static void AddToIdle(InvariantChecker& c, const std::string& type, int r, int64_t v) {
    c.tally_[c.type_index_.at(type)].idle[r] += v;
  }
  static void AddToUsage(InvariantChecker& c, const std::string& team, const std::string& type,
                         int r, int64_t v) {
    c.teams_[c.team_index_.at(team)].usage[c.type_index_.at(type)].a[r] += v;
  }
};

namespace {

// One 1-vCPU type "unit" of 20 instances; the engine and the checker told the same events.
class Fixture {
 public:
  Fixture()
      : types_{{"unit", 1, 1, 0, 20}},
        policy_([] {
          SchedulerPolicy p;
          p.fair_share = false;
          p.idle_resource_sharing = false;
          return p;
        }()),
        chk(types_, policy_) {
    EXPECT_TRUE(eng.SetCapacity(types_).ok());
    EXPECT_TRUE(eng.SetPolicy(policy_).ok());
  }
  void Team(const std::string& name, int64_t nominal, SharingStrategy s, int borrow_pct) {
    TeamQuota q;
    q.team = name;
    q.resources.push_back({"unit", nominal, {}, {}, {}});
    q.strategy = s;
    q.borrow_limit_percent = borrow_pct;
    ASSERT_TRUE(eng.UpsertQuota(q).ok());
    chk.UpsertQuota(q);
  }
  void Submit(uint64_t id, const std::string& team, int count) {
    WorkloadSpec s;
    s.id = id;
    s.team = team;
    s.submit_time_ms = static_cast<int64_t>(id);
    s.instance_type = "unit";
    s.count = count;
    ASSERT_TRUE(eng.Submit(s).ok());
    chk.Submitted(s);
  }
  void Remove(uint64_t id) {
    ASSERT_TRUE(eng.Remove(id).ok());
    chk.Removed(id);
  }
  // A real engine cycle, checked on the fast path.
  CycleResult Cycle() {
    CycleResult r = eng.RunCycle(0);
    chk.CheckCycle(r, eng, /*full=*/false);
    return r;
  }
  bool Said(const std::string& part) const {
    return std::any_of(chk.messages().begin(), chk.messages().end(),
                       [&](const std::string& m) { return m.find(part) != std::string::npos; });
  }
  std::string All() const {
    std::string s;
    for (const auto& m : chk.messages()) s += m + "\n";
    return s;
  }

  std::vector<InstanceTypeCapacity> types_;
  SchedulerPolicy policy_;
  Engine eng;
  InvariantChecker chk;
};

CycleResult Forged(uint64_t id) {
  CycleResult r;
  r.admitted.push_back(Admission{id, false, {}});
  return r;
}

TEST(InvariantChecker, FastPathCatchesForgedOverAdmission) {
  Fixture f;
  f.Team("a", 10, SharingStrategy::kLendAndBorrow, 50);  // may reach 15
  f.Team("b", 10, SharingStrategy::kLendAndBorrow, 50);
  f.Submit(1, "a", 20);
  // The engine admits nothing (20 > 15); the forged cycle says it admitted job 1.
  f.chk.CheckCycle(Forged(1), f.eng, /*full=*/false);
  EXPECT_GT(f.chk.violations(), 0);
  EXPECT_TRUE(f.Said("admitting 1: a on unit resource 1: usage 20000 > nominal 10000 + "
                     "borrow limit 5000"))
      << f.All();
  // Conservation on the touched team: the engine never admitted it.
  EXPECT_TRUE(f.Said("usage of a on unit resource 1: engine 0, sum of admitted 20000"))
      << f.All();
  EXPECT_EQ(f.chk.stats().recounts, 0);  // caught by the per-cycle path, not a recount
}

TEST(InvariantChecker, FastPathCatchesForgedCohortOverBorrowing) {
  Fixture f;
  f.Team("a", 10, SharingStrategy::kLendAndBorrow, 100);  // may reach 20 on its own limit
  f.Team("b", 10, SharingStrategy::kDontLend, 0);         // but b lends nothing
  f.Submit(1, "a", 15);
  f.chk.CheckCycle(Forged(1), f.eng, /*full=*/false);
  EXPECT_TRUE(f.Said("admitting 1: unit resource 2: borrowed 5120 > lendable idle 0"))
      << f.All();
  EXPECT_FALSE(f.Said("borrow limit")) << f.All();
}

TEST(InvariantChecker, FastPathCatchesAFittingJobLeftPending) {
  Fixture f;
  f.Team("a", 10, SharingStrategy::kLendAndBorrow, 50);
  f.Submit(1, "a", 4);
  f.Submit(2, "a", 4);
  f.Cycle();
  ASSERT_EQ(f.chk.violations(), 0) << f.All();
  // Job 3 fits a's unused nominal (2 of 10 free); a cycle result that leaves it out is
  // caught on the queue the submission touched, without a full check.
  f.Submit(3, "a", 2);
  (void)f.eng.RunCycle(0);
  f.chk.CheckCycle(CycleResult{}, f.eng, /*full=*/false);
  EXPECT_TRUE(f.Said("job 3 of a fits the team's unused nominal quota but stays pending"))
      << f.All();
}

TEST(InvariantChecker, RecountCatchesCorruptedIdleTally) {
  Fixture f;
  f.Team("a", 10, SharingStrategy::kLendAndBorrow, 100);
  f.Team("b", 10, SharingStrategy::kDontLend, 0);
  f.Submit(1, "a", 6);
  f.Submit(2, "b", 3);
  ASSERT_EQ(f.Cycle().admitted.size(), 2u);
  ASSERT_EQ(f.chk.violations(), 0) << f.All();
  ASSERT_TRUE(f.chk.Recount()) << f.All();

  // A corrupted tally claims 100 vCPU and ~100 GiB idle and lent to the cohort: a forged
  // over-borrowing admission (b lends nothing, so a may not pass its nominal) now passes the
  // cohort check.
  CheckerTestPeer::AddToIdle(f.chk, "unit", 1, 100'000);
  CheckerTestPeer::AddToIdle(f.chk, "unit", 2, 100'000);
  f.Submit(3, "a", 9);
  f.chk.CheckCycle(Forged(3), f.eng, /*full=*/false);
  EXPECT_FALSE(f.Said("lendable idle")) << f.All();
  const int64_t before = f.chk.violations();
  // The periodic full check recounts from scratch and reports the corrupted tally.
  f.chk.CheckCycle(CycleResult{}, f.eng, /*full=*/true);
  EXPECT_GT(f.chk.violations(), before);
  EXPECT_TRUE(f.Said("recount: idle of unit resource 1: incremental 100000, recount 0"))
      << f.All();
  // The recount replaced the tally: a second one agrees.
  EXPECT_TRUE(f.chk.Recount()) << f.All();
}

TEST(InvariantChecker, RecountCatchesCorruptedUsageTheFastPathDoesNotLookAt) {
  Fixture f;
  f.Team("a", 10, SharingStrategy::kLendAndBorrow, 50);
  f.Team("b", 10, SharingStrategy::kLendAndBorrow, 50);
  f.Submit(1, "a", 6);
  f.Submit(2, "b", 3);
  ASSERT_EQ(f.Cycle().admitted.size(), 2u);
  CheckerTestPeer::AddToUsage(f.chk, "b", "unit", 0, 5);
  // b is untouched by the next cycle: the fast path does not compare it.
  f.Submit(3, "a", 1);
  f.Cycle();
  EXPECT_EQ(f.chk.violations(), 0) << f.All();
  f.chk.CheckCycle(CycleResult{}, f.eng, /*full=*/true);
  EXPECT_TRUE(f.Said("recount: usage of b on unit resource 0: incremental 5, sum of admitted 0"))
      << f.All();
}

TEST(InvariantChecker, RecountsWhenNothingHoldsQuota) {
  Fixture f;
  f.Team("a", 10, SharingStrategy::kLendAndBorrow, 50);
  f.Submit(1, "a", 6);
  ASSERT_EQ(f.Cycle().admitted.size(), 1u);
  EXPECT_EQ(f.chk.stats().recounts, 0);
  CheckerTestPeer::AddToIdle(f.chk, "unit", 2, 7);
  // The last job finishes (the end of a trace): the fast-path cycle recounts.
  f.Remove(1);
  f.Cycle();
  EXPECT_EQ(f.chk.stats().recounts, 1);
  EXPECT_TRUE(f.Said("recount: idle of unit resource 2")) << f.All();
}

// A trace with full checks only every 50 cycles: the fast path alone in between, recounts
// clean, and every cycle checked.
TEST(InvariantChecker, SparseFullChecksOnATraceAreClean) {
  for (bool fair : {true, false}) {
    TraceConfig cfg = TierS();
    cfg.workloads = 3000;
    cfg.fair_share = fair;
    SimOptions opt;
    opt.full_check_every = 50;
    const InvariantChecker::Stats before = InvariantChecker::ProcessTotals();
    const SimReport rep = Simulate(GenerateTrace(cfg), opt);
    const InvariantChecker::Stats after = InvariantChecker::ProcessTotals();
    EXPECT_EQ(rep.violations, 0) << (fair ? "fair" : "fcfs");
    for (const auto& m : rep.violation_messages) ADD_FAILURE() << m;
    EXPECT_EQ(after.cycles - before.cycles, rep.cycles);
    EXPECT_EQ(after.full_checks - before.full_checks, rep.cycles / 50);
    // Plus one at the end, when nothing holds quota any more (unless that was a full one).
    EXPECT_GE(after.recounts - before.recounts, rep.cycles / 50 + (rep.cycles % 50 ? 1 : 0));
    EXPECT_GT(after.queues_checked - before.queues_checked, rep.cycles);
  }
}

}  // namespace
}  // namespace hf::governance
