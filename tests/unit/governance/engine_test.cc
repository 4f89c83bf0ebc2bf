// Table tests of the governance engine: HyperPod's worked scenarios (docs/governance.md)
// and Kueue v0.19 scheduler / preemption cases (kubernetes-sigs/kueue
// test/integration/singlecluster/scheduler/),
// ported to the flat HyperPod model (one cohort; a team = a ClusterQueue; an instance type =
// a flavor). Kueue's "cpu" quantities become instances of a 1-vCPU type "unit".
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "hyperfleet/governance/engine.h"

namespace hf::governance {
namespace {

using Victims = std::map<uint64_t, PreemptionReason>;

class Gov {
 public:
  explicit Gov(bool fair_share = true, std::vector<InstanceTypeCapacity> types = {
                                           {"unit", 1, 1, 0, 100},
                                           {"ml.g5.8xlarge", 32, 128, 1, 4},
                                           {"ml.g5.12xlarge", 48, 192, 4, 2}}) {
    EXPECT_TRUE(e.SetCapacity(types).ok());
    SchedulerPolicy p;
    p.fair_share = fair_share;
    p.priority_classes = {{"inference", 90}, {"experimentation", 80}, {"training", 70},
                          {"fine-tuning", 50}, {"low", 10}, {"mid", 50}, {"high", 100}};
    EXPECT_TRUE(e.SetPolicy(p).ok());
  }
  TeamQuota& Team(const std::string& name, int64_t count, std::string type = "unit") {
    TeamQuota q;
    q.team = name;
    q.resources.push_back({type, count, {}, {}, {}});
    quotas[name] = q;
    return quotas[name];
  }
  void Apply() {
    for (auto& [n, q] : quotas) ASSERT_TRUE(e.UpsertQuota(q).ok()) << n;
  }
  void Submit(uint64_t id, const std::string& team, const std::string& cls, int count,
              std::string type = "unit") {
    WorkloadSpec s;
    s.id = id;
    s.team = team;
    s.priority_class = cls;
    s.submit_time_ms = static_cast<int64_t>(id);
    s.instance_type = type;
    s.count = count;
    ASSERT_TRUE(e.Submit(s).ok()) << id;
  }
  // Submits and admits at once (asserting it was admitted without preemption).
  void Running(uint64_t id, const std::string& team, const std::string& cls, int count,
               std::string type = "unit") {
    Submit(id, team, cls, count, type);
    CycleResult r = e.RunCycle(0);
    ASSERT_EQ(r.admitted.size(), 1u) << id;
    ASSERT_EQ(r.admitted[0].id, id);
    ASSERT_TRUE(r.admitted[0].victims.empty());
  }
  struct Outcome {
    std::vector<uint64_t> admitted;
    Victims victims;
    std::vector<uint64_t> never_fits;
  };
  Outcome Cycle() {
    CycleResult r = e.RunCycle(0);
    Outcome o;
    for (auto& a : r.admitted) {
      o.admitted.push_back(a.id);
      for (auto& v : a.victims) o.victims[v.victim] = v.reason;
    }
    o.never_fits = r.never_fits;
    return o;
  }
  Engine e;
  std::map<std::string, TeamQuota> quotas;
};

using ::std::vector;
constexpr auto kReclaim = PreemptionReason::kReclaim;
constexpr auto kInQueue = PreemptionReason::kInClusterQueue;
constexpr auto kFair = PreemptionReason::kFairSharing;

// ---- HyperPod's worked scenarios (docs/governance.md): 4 × ml.g5.8xlarge, teams A and B
// with Count=2, LendAndBorrow, BorrowLimit 50, PreemptTeamTasks LowerPriority, weight 0,
// FairShare Enabled.

class HyperPodScenario : public ::testing::Test {
 protected:
  void SetUp() override {
    for (auto n : {"team-a", "team-b"}) {
      TeamQuota& q = g.Team(n, 2, "ml.g5.8xlarge");
      q.borrow_limit_percent = 50;
    }
    g.Apply();
  }
  Gov g;
};

TEST_F(HyperPodScenario, BorrowThenReclaimThenIntraTeamPriority) {
  // 1. Borrow: A's 3-instance job runs on 2 nominal + 1 borrowed (limit 50% of 2 = 1).
  g.Submit(1, "team-a", "training", 3, "ml.g5.8xlarge");
  auto o = g.Cycle();
  EXPECT_EQ(o.admitted, vector<uint64_t>{1});
  EXPECT_EQ(g.e.Usage("team-a", "ml.g5.8xlarge")[kAccelerators], 3);
  // A 4-instance job can never fit A (2 + 1): classified, and it blocks nothing.
  g.Submit(9, "team-a", "inference", 4, "ml.g5.8xlarge");
  o = g.Cycle();
  EXPECT_EQ(o.never_fits, vector<uint64_t>{9});
  EXPECT_EQ(g.e.Explain(9)->verdict, Verdict::kNeverFits);

  // 2. Reclaim: B's 2-instance job is admitted; A's job is evicted whatever its priority.
  g.Submit(2, "team-b", "fine-tuning", 2, "ml.g5.8xlarge");
  o = g.Cycle();
  EXPECT_EQ(o.admitted, vector<uint64_t>{2});
  EXPECT_EQ(o.victims, (Victims{{1, kReclaim}}));
  EXPECT_EQ(g.e.Usage("team-a", "ml.g5.8xlarge")[kAccelerators], 0);

  // A's job now waits: it would need to borrow 1 while B uses its whole nominal.
  auto why = g.e.Explain(1);
  ASSERT_TRUE(why.ok());
  EXPECT_EQ(why->verdict, Verdict::kWaiting);
  EXPECT_EQ(why->resources[kAccelerators].nominal, 2);
  EXPECT_EQ(why->resources[kAccelerators].borrow_limit, 1);
  EXPECT_EQ(why->resources[kAccelerators].idle_in_cohort, 0);
  EXPECT_NE(RenderWhyPending(*why).find("team-a"), std::string::npos);

  // 3. Intra-team priority: B's experimentation job preempts B's fine-tuning job
  // (InClusterQueue); it may not borrow (B would need 4 > 2 + 1).
  g.Submit(3, "team-b", "experimentation", 2, "ml.g5.8xlarge");
  o = g.Cycle();
  EXPECT_EQ(o.admitted, vector<uint64_t>{3});
  EXPECT_EQ(o.victims, (Victims{{2, kInQueue}}));
  // Next cycle: A's 3-instance job still cannot borrow; B's evicted job still waits.
  o = g.Cycle();
  EXPECT_TRUE(o.admitted.empty());
}

TEST_F(HyperPodScenario, PreemptTeamTasksNeverKeepsTheRunningJob) {
  g.quotas["team-b"].preempt_team_tasks = PreemptTeamTasks::kNever;
  g.Apply();
  g.Running(2, "team-b", "fine-tuning", 2, "ml.g5.8xlarge");
  g.Submit(3, "team-b", "experimentation", 2, "ml.g5.8xlarge");
  auto o = g.Cycle();
  EXPECT_TRUE(o.admitted.empty());
  EXPECT_TRUE(o.victims.empty());
}

TEST(HyperPodCliWalkthrough, LenderReclaimsAtEqualPriority) {
  // 1 × ml.g5.12xlarge per team, BorrowLimit 100, both jobs training-priority.
  Gov g;
  for (auto n : {"team-a", "team-b"}) g.Team(n, 1, "ml.g5.12xlarge").borrow_limit_percent = 100;
  g.Apply();
  g.Running(1, "team-a", "training", 2, "ml.g5.12xlarge");  // 1 nominal + 1 borrowed
  g.Submit(2, "team-b", "training", 1, "ml.g5.12xlarge");
  auto o = g.Cycle();
  EXPECT_EQ(o.admitted, vector<uint64_t>{2});
  EXPECT_EQ(o.victims, (Victims{{1, kReclaim}}));
}

// ---- Kueue preemption_test.go (classic preemption: FairShare Disabled).

TEST(KueuePreemption, PreemptLowestPriority) {
  Gov g(false);
  g.Team("a", 6).strategy = SharingStrategy::kDontLend;
  g.Apply();
  g.Running(1, "a", "low", 2);
  g.Running(2, "a", "mid", 2);
  g.Running(3, "a", "high", 2);
  g.Submit(4, "a", "high", 2);
  auto o = g.Cycle();
  EXPECT_EQ(o.admitted, vector<uint64_t>{4});
  EXPECT_EQ(o.victims, (Victims{{1, kInQueue}}));
}

TEST(KueuePreemption, MinimalSetExcludesLowPriority) {
  Gov g(false);
  g.Team("a", 6).strategy = SharingStrategy::kDontLend;
  g.Apply();
  g.Running(1, "a", "low", 1);
  g.Running(2, "a", "mid", 2);
  g.Running(3, "a", "high", 3);
  g.Submit(4, "a", "high", 2);
  auto o = g.Cycle();
  // Removing low frees 1 (not enough), removing mid too frees 3; fill-back returns low.
  EXPECT_EQ(o.victims, (Victims{{2, kInQueue}}));
}

TEST(KueuePreemption, NoPreemptionOfEqualPriorityInOwnQueue) {
  Gov g(false);
  g.Team("a", 2).strategy = SharingStrategy::kDontLend;
  g.Apply();
  g.Running(1, "a", "mid", 2);
  g.Submit(2, "a", "mid", 2);
  auto o = g.Cycle();
  EXPECT_TRUE(o.admitted.empty());
}

TEST(KueuePreemption, ReclaimQuotaFromBorrowerRegardlessOfPriority) {
  Gov g(false);
  g.Team("a", 6).borrow_limit_percent = 100;
  g.Team("b", 6).borrow_limit_percent = 100;
  g.Apply();
  g.Running(1, "b", "high", 6);
  g.Running(2, "b", "high", 3);  // borrows 3 of a's idle quota
  g.Submit(3, "a", "low", 4);
  auto o = g.Cycle();
  EXPECT_EQ(o.admitted, vector<uint64_t>{3});
  EXPECT_EQ(o.victims, (Victims{{2, kReclaim}}));
}

TEST(KueuePreemption, NotEnoughWorkloadsBorrowing) {
  Gov g(false);
  g.Team("a", 6);
  g.Team("b", 6);
  g.Apply();
  g.Running(1, "b", "low", 6);  // within b's nominal: not reclaimable
  g.Running(2, "a", "low", 4);
  g.Submit(3, "a", "high", 4);  // would need a's own low job (4) — not the 2 free
  auto o = g.Cycle();
  EXPECT_EQ(o.victims, (Victims{{2, kInQueue}}));
  g.Submit(4, "a", "high", 4);
  o = g.Cycle();
  EXPECT_TRUE(o.admitted.empty());  // only b's nominal use is left: nothing to preempt
}

TEST(KueuePreemption, DoNotPreemptInCohortWhenPreemptorWouldBorrow) {
  // "Should not preempt Workloads in the cohort, if the ClusterQueue requires borrowing".
  Gov g(false);
  g.Team("a", 2).borrow_limit_percent = 200;
  g.Team("b", 4).borrow_limit_percent = 100;
  g.Apply();
  g.Running(1, "b", "low", 6);  // borrows a's 2
  g.Submit(2, "a", "high", 4);  // exceeds a's nominal: may not reclaim
  auto o = g.Cycle();
  EXPECT_TRUE(o.admitted.empty());
  EXPECT_TRUE(o.victims.empty());
}

TEST(KueuePreemption, LongRangeReclaimTakesNewestBorrowerFirst) {
  Gov g(false);
  g.Team("a", 4);
  g.Team("b", 2).borrow_limit_percent = 200;
  g.Apply();
  g.Running(1, "b", "low", 2);
  g.Running(2, "b", "low", 2);  // borrowed
  g.Running(3, "b", "low", 2);  // borrowed, newest
  g.Submit(4, "a", "low", 2);
  auto o = g.Cycle();
  EXPECT_EQ(o.victims, (Victims{{3, kReclaim}}));
}

TEST(KueuePreemption, CannotPreemptBeyondRequestableQuotaIncludingLendingLimit) {
  // DontLend (lendingLimit 0) makes b's quota private: a's request above what the cohort
  // can ever lend never fits and preempts nothing.
  Gov g(false);
  g.Team("a", 2).borrow_limit_percent = 500;
  g.Team("b", 6).strategy = SharingStrategy::kDontLend;
  g.Apply();
  g.Running(1, "b", "low", 6);
  g.Submit(2, "a", "high", 4);
  auto o = g.Cycle();
  EXPECT_EQ(o.never_fits, vector<uint64_t>{2});
  EXPECT_TRUE(o.victims.empty());
}

TEST(GovernanceRounds, QuotaFreedBeyondThePreemptorsNeedIsUsedInTheSameCycle) {
  // After a round with evictions only jobs that fit what is available are looked at again
  // (docs/governance.md, "A cycle"): here the reclaim frees 6, a takes 2, c's waiting
  // borrower takes 3 of the 4 left in the same cycle.
  Gov g(false);
  g.Team("a", 6);
  g.Team("b", 2).borrow_limit_percent = 500;
  g.Team("c", 2).borrow_limit_percent = 500;
  g.Apply();
  g.Running(1, "b", "low", 2);
  g.Running(2, "b", "low", 6);  // borrows a's idle 6
  g.Running(3, "c", "low", 2);  // the cohort is full
  g.Submit(4, "c", "low", 3);
  EXPECT_TRUE(g.Cycle().admitted.empty());
  g.Submit(5, "a", "low", 2);  // within a's nominal: reclaims
  auto o = g.Cycle();
  EXPECT_EQ(o.admitted, (vector<uint64_t>{5, 4}));
  EXPECT_EQ(o.victims, (Victims{{2, kReclaim}}));
  ASSERT_TRUE(g.e.CheckConsistency().ok());
}

// ---- Kueue scheduler_test.go.

TEST(KueueScheduler, AdmitsAsTheyFitAndTwoSmallAfterABigFinishes) {
  Gov g(false);
  g.Team("a", 5).strategy = SharingStrategy::kDontLend;
  g.Apply();
  g.Submit(1, "a", "", 5);
  g.Submit(2, "a", "", 3);
  g.Submit(3, "a", "", 2);
  auto o = g.Cycle();
  EXPECT_EQ(o.admitted, vector<uint64_t>{1});
  ASSERT_TRUE(g.e.Remove(1).ok());
  o = g.Cycle();
  EXPECT_EQ(o.admitted, (vector<uint64_t>{2, 3}));
}

TEST(KueueScheduler, BorrowsFromCohortAndStartsUnderNominalBeforeBorrowing) {
  Gov g(false);
  g.Team("a", 4).borrow_limit_percent = 100;
  g.Team("b", 4).borrow_limit_percent = 100;
  g.Apply();
  g.Submit(1, "a", "high", 6);  // borrows 2 (higher priority, earlier)
  g.Submit(2, "b", "low", 4);   // within nominal: goes first in the cycle
  auto o = g.Cycle();
  EXPECT_EQ(o.admitted, vector<uint64_t>{2});  // then a's 6 cannot borrow b's quota
  ASSERT_TRUE(g.e.Remove(2).ok());
  o = g.Cycle();
  EXPECT_EQ(o.admitted, vector<uint64_t>{1});
}

TEST(KueueScheduler, UsingCohortsForSharingWithLendingLimit) {
  // Lend lends but never borrows; DontLend neither.
  Gov g(false);
  g.Team("lender", 4).strategy = SharingStrategy::kLend;
  g.Team("private", 4).strategy = SharingStrategy::kDontLend;
  g.Team("borrower", 1).borrow_limit_percent = 1000;
  g.Apply();
  g.Submit(1, "borrower", "", 5);  // 1 + the lender's 4; the private 4 is not lendable
  g.Submit(2, "lender", "", 5);    // Lend: never above nominal → never fits
  auto o = g.Cycle();
  EXPECT_EQ(o.admitted, vector<uint64_t>{1});
  EXPECT_EQ(o.never_fits, vector<uint64_t>{2});
  g.Submit(3, "borrower", "", 1);
  o = g.Cycle();
  EXPECT_TRUE(o.admitted.empty());
  g.Running(4, "private", "", 4);
}

TEST(KueueScheduler, NoBorrowingThroughADeletedTeamAndNoOverAdmission) {
  Gov g(false);
  g.Team("a", 2).borrow_limit_percent = 500;
  g.Team("b", 4);
  g.Apply();
  g.Running(1, "a", "", 4);  // borrows 2 of b's
  ASSERT_TRUE(g.e.RemoveQuota("b").ok());
  // b's capacity left the cohort: a is over-admitted but nothing is evicted, and a can
  // not borrow more.
  g.Submit(2, "a", "", 1);
  auto o = g.Cycle();
  EXPECT_TRUE(o.admitted.empty());
  EXPECT_TRUE(o.victims.empty());
  EXPECT_EQ(g.e.Usage("a", "unit")[kVCpuMilli], 4000);
}

TEST(KueueScheduler, QuotaDecreaseDoesNotEvictAndDisabledTeamAdmitsNothing) {
  Gov g(false);
  g.Team("a", 4).strategy = SharingStrategy::kDontLend;
  g.Apply();
  g.Running(1, "a", "", 4);
  g.quotas["a"].resources[0].count = 2;
  g.Apply();
  EXPECT_EQ(g.e.Usage("a", "unit")[kVCpuMilli], 4000);
  g.quotas["a"].active = false;
  g.quotas["a"].resources[0].count = 10;
  g.Apply();
  g.Submit(2, "a", "", 1);
  auto o = g.Cycle();
  EXPECT_TRUE(o.admitted.empty());
  EXPECT_EQ(g.e.Explain(2)->verdict, Verdict::kTeamInactive);
  g.quotas["a"].active = true;
  g.Apply();
  o = g.Cycle();
  EXPECT_EQ(o.admitted, vector<uint64_t>{2});
}

TEST(KueueScheduler, NeverFitDoesNotBlockOthers) {
  Gov g(false);
  g.Team("a", 4).strategy = SharingStrategy::kDontLend;
  g.Apply();
  g.Submit(1, "a", "high", 5);
  g.Submit(2, "a", "low", 1);
  auto o = g.Cycle();
  EXPECT_EQ(o.never_fits, vector<uint64_t>{1});
  EXPECT_EQ(o.admitted, vector<uint64_t>{2});
  // A larger quota makes it fit.
  g.quotas["a"].resources[0].count = 6;
  g.Apply();
  o = g.Cycle();
  EXPECT_EQ(o.admitted, vector<uint64_t>{1});
}

// ---- Kueue preemption_fair_test.go / fair_sharing_test.go (FairShare Enabled).

TEST(KueueFairSharing, AdmitsTheLowestShareFirst) {
  Gov g(true);
  g.Team("a", 2).fair_share_weight = 1;
  g.Team("b", 2).fair_share_weight = 1;
  g.Team("lender", 4).strategy = SharingStrategy::kLend;
  g.Apply();
  for (auto& [n, q] : g.quotas) q.borrow_limit_percent = 500;
  g.Apply();
  g.Running(1, "a", "", 3);  // a borrows 1
  g.Submit(2, "a", "", 2);   // would borrow 2 more (share 3)
  g.Submit(3, "b", "", 4);   // borrows 2 (share 2): wins the tie-break on share
  auto o = g.Cycle();
  EXPECT_EQ(o.admitted, vector<uint64_t>{3});
}

TEST(KueueFairSharing, CanPreemptAnythingBorrowingFromZeroWeightTeam) {
  Gov g(true);
  g.Team("a", 3).fair_share_weight = 1;
  g.Team("zero", 3).fair_share_weight = 0;
  g.Team("lender", 3).strategy = SharingStrategy::kLend;
  for (auto& [n, q] : g.quotas) q.borrow_limit_percent = 500;
  g.Apply();
  g.Running(1, "zero", "high", 3);
  g.Running(2, "zero", "high", 3);  // borrows 3 (lender's)
  g.Running(3, "a", "low", 3);
  g.Submit(4, "a", "low", 2);  // a would borrow 2: zero-weight borrowers rank above all
  auto o = g.Cycle();
  EXPECT_EQ(o.admitted, vector<uint64_t>{4});
  EXPECT_EQ(o.victims, (Victims{{2, kFair}}));
}

TEST(KueueFairSharing, CannotPreemptNominalFromZeroWeightTeam) {
  Gov g(true);
  g.Team("a", 3).fair_share_weight = 1;
  g.Team("zero", 3).fair_share_weight = 0;
  for (auto& [n, q] : g.quotas) q.borrow_limit_percent = 500;
  g.Apply();
  g.Running(1, "zero", "high", 3);  // within its nominal
  g.Running(2, "a", "low", 3);
  g.Submit(3, "a", "low", 1);
  auto o = g.Cycle();
  EXPECT_TRUE(o.admitted.empty());
}

TEST(KueueFairSharing, ZeroWeightTeamReclaimsItsNominalQuota) {
  Gov g(true);
  g.Team("a", 3).fair_share_weight = 50;
  g.Team("zero", 3).fair_share_weight = 0;
  for (auto& [n, q] : g.quotas) q.borrow_limit_percent = 500;
  g.Apply();
  g.Running(1, "a", "low", 6);  // borrows all of zero's quota
  g.Submit(2, "zero", "low", 2);
  auto o = g.Cycle();
  EXPECT_EQ(o.admitted, vector<uint64_t>{2});
  EXPECT_EQ(o.victims, (Victims{{1, kReclaim}}));
}

TEST(KueueFairSharing, CannotPreemptWhenItWouldSwitchTheImbalance) {
  Gov g(true);
  g.Team("a", 2).fair_share_weight = 1;
  g.Team("b", 2).fair_share_weight = 1;
  g.Team("lender", 4).strategy = SharingStrategy::kLend;
  for (auto& [n, q] : g.quotas) q.borrow_limit_percent = 500;
  g.Apply();
  g.Running(1, "a", "", 2);
  g.Running(2, "b", "", 2);
  g.Running(3, "b", "", 2);
  g.Running(7, "b", "", 1);  // b borrows 3 of the lender's 4
  g.Running(4, "a", "", 1);  // a borrows 1
  // a asks for 3 more: after admission a would borrow 4 > b's 3 − 1 = 2 (and ≥ b's 3).
  g.Submit(5, "a", "", 3);
  auto o = g.Cycle();
  EXPECT_TRUE(o.admitted.empty());
  // a asks for 1: a would borrow 2 ≤ b's 3 − 1 = 2: b's newest borrowed job goes.
  g.Submit(6, "a", "", 1);
  o = g.Cycle();
  EXPECT_EQ(o.admitted, vector<uint64_t>{6});
  EXPECT_EQ(o.victims, (Victims{{7, kFair}}));
}

TEST(KueueFairSharing, HigherWeightMayPreemptMore) {
  Gov g(true);
  g.Team("heavy", 2).fair_share_weight = 3;
  g.Team("light", 2).fair_share_weight = 1;
  g.Team("lender", 6).strategy = SharingStrategy::kLend;
  for (auto& [n, q] : g.quotas) q.borrow_limit_percent = 500;
  g.Apply();
  g.Running(1, "heavy", "", 2);
  g.Running(2, "light", "", 2);
  g.Running(3, "light", "", 1);
  g.Running(7, "light", "", 1);  // light borrows 2: share 2/1
  g.Running(4, "heavy", "", 4);  // heavy borrows 4: share 4/3
  g.Submit(5, "heavy", "", 2);   // heavy would borrow 6: share 2 — not below light's 2
  auto o = g.Cycle();
  EXPECT_TRUE(o.admitted.empty());
  g.Submit(6, "heavy", "", 1);   // heavy 5/3 < light 2 (LessThanInitialShare)
  o = g.Cycle();
  EXPECT_EQ(o.victims, (Victims{{7, kFair}}));
}

// Deviation from Kueue (docs/governance.md): the preemptor's share counts everything its
// fair-sharing victims free. Here b's only borrowed job frees 3 for a request of 1; a's team
// could fill all 3 and borrow 4 > b's 3, after which b would take it back: no preemption.
TEST(KueueFairSharing, VictimLargerThanTheRequestCountsWhatItFrees) {
  Gov g(true);
  g.Team("a", 2).fair_share_weight = 1;
  g.Team("b", 2).fair_share_weight = 1;
  g.Team("lender", 4).strategy = SharingStrategy::kLend;
  for (auto& [n, q] : g.quotas) q.borrow_limit_percent = 500;
  g.Apply();
  g.Running(1, "a", "", 2);
  g.Running(2, "b", "", 2);
  g.Running(3, "b", "", 3);  // b borrows 3 of the lender's 4
  g.Running(4, "a", "", 1);  // a borrows 1
  g.Submit(6, "a", "", 1);
  const auto o = g.Cycle();
  EXPECT_TRUE(o.admitted.empty());
  EXPECT_TRUE(o.victims.empty());
}

// A fair-sharing victim never leaves its team below nominal: the team would reclaim at once.
TEST(KueueFairSharing, VictimTeamStaysAtNominal) {
  Gov g(true);
  g.Team("a", 2).fair_share_weight = 10;
  g.Team("b", 4).fair_share_weight = 1;
  g.Team("lender", 2).strategy = SharingStrategy::kLend;
  for (auto& [n, q] : g.quotas) q.borrow_limit_percent = 500;
  g.Apply();
  g.Running(1, "a", "", 2);
  g.Running(2, "b", "", 5);  // b borrows 1 with one job of 5
  g.Running(3, "a", "", 1);  // a borrows 1; the cohort (8) is full
  g.Submit(4, "a", "", 1);   // a's share 2/10 < b's 1: but b would drop to 0 of its 4
  const auto o = g.Cycle();
  EXPECT_TRUE(o.admitted.empty());
}

// ---- Quota arithmetic and validation.

TEST(GovernanceQuota, RatioFillAndBorrowLimits) {
  Resources inst = PerInstance({"ml.p5.48xlarge", 192, 2048, 8, 4});
  QuotaResource q{"ml.p5.48xlarge", {}, 16.0, {}, {}};
  auto r = ResolveQuotaResource(q, inst, "f");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[kAccelerators], 16);
  EXPECT_EQ((*r)[kVCpuMilli], 384'000);
  EXPECT_EQ((*r)[kMemoryMiB], 4096 * 1024);
  q = {"ml.p5.48xlarge", {}, {}, 96.0, {}};
  r = ResolveQuotaResource(q, inst, "f");
  EXPECT_EQ((*r)[kAccelerators], 0);
  EXPECT_EQ((*r)[kMemoryMiB], 1024 * 1024);
  q = {"ml.p5.48xlarge", 2, {}, {}, 100.0};
  r = ResolveQuotaResource(q, inst, "f");
  EXPECT_EQ((*r)[kAccelerators], 16);
  EXPECT_EQ((*r)[kMemoryMiB], 100 * 1024);
  EXPECT_FALSE(ResolveQuotaResource(QuotaResource{"x", {}, {}, {}, {}}, inst, "f").ok());
  EXPECT_FALSE(ResolveQuotaResource(QuotaResource{"x", -1, {}, {}, {}}, inst, "f").ok());

  Gov g;
  TeamQuota& a = g.Team("a", 4);
  a.borrow_limit_percent = 50;
  a.absolute_borrow_limits.push_back({"unit", 3, {}, {}, {}});
  g.Team("b", 10);
  g.Apply();
  g.Submit(1, "a", "", 7);  // 4 + absolute 3
  g.Submit(2, "a", "", 8);
  auto o = g.Cycle();
  EXPECT_EQ(o.admitted, vector<uint64_t>{1});
  EXPECT_EQ(o.never_fits, vector<uint64_t>{2});
}

TEST(GovernanceQuota, ValidationNamesTheField) {
  Gov g;
  TeamQuota q;
  q.team = "a";
  q.resources.push_back({"ml.nope", 1, {}, {}, {}});
  auto s = g.e.UpsertQuota(q);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ComputeQuotaResources[0].InstanceType"), std::string::npos);
  q.resources = {{"unit", 1, {}, {}, {}}};
  q.fair_share_weight = 101;
  EXPECT_NE(g.e.UpsertQuota(q).message().find("FairShareWeight"), std::string::npos);
  q.fair_share_weight = 1;
  q.resources.push_back({"unit", 1, {}, {}, {}});
  EXPECT_NE(g.e.UpsertQuota(q).message().find("appears twice"), std::string::npos);
  SchedulerPolicy p;
  p.priority_classes.assign(11, {"x", 1});
  EXPECT_FALSE(g.e.SetPolicy(p).ok());
  WorkloadSpec w;
  w.id = 1;
  w.team = "nobody";
  w.instance_type = "unit";
  EXPECT_EQ(g.e.Submit(w).code(), absl::StatusCode::kNotFound);
}

TEST(GovernanceQuota, QuotaLargerThanClusterIsAcceptedAndReported) {
  Gov g;
  g.Team("a", 3, "ml.g5.8xlarge");
  g.Team("b", 3, "ml.g5.8xlarge");
  g.Apply();
  auto report = g.e.QuotaExcessReport();
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0].instance_type, "ml.g5.8xlarge");
  EXPECT_EQ(report[0].nominal_sum[kAccelerators], 6);
  EXPECT_EQ(report[0].capacity[kAccelerators], 4);
}

TEST(GovernanceQuota, IdleResourceSharingLendsUnallocatedCapacity) {
  Gov g(true);
  SchedulerPolicy p;
  p.idle_resource_sharing = true;
  ASSERT_TRUE(g.e.SetPolicy(p).ok());
  g.Team("a", 1, "ml.g5.8xlarge").borrow_limit_percent = 300;  // cluster has 4
  g.Apply();
  g.Submit(1, "a", "", 4, "ml.g5.8xlarge");
  auto o = g.Cycle();
  EXPECT_EQ(o.admitted, vector<uint64_t>{1});
}

}  // namespace
}  // namespace hf::governance
