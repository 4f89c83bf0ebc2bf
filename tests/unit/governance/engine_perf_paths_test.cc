// Hand-computed scenarios for the admission engine's fast paths (commits ac347d1, 0f428df,
// 3c2dd73): victim searches that try victims without re-keying the borrower sets and put
// them back when the search fails, the lazy walk of the borrower set and first-candidate
// target loads, the exact fallback of the approximate share comparison, the fair-sharing
// queue skip, the cached NeverFits bound and the stream merge that drops closed classes.
// Each scenario's outcome is derived in its comments from docs/governance.md; the engine's
// indexes are checked (CheckConsistency) after every cycle.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "hyperfleet/governance/engine.h"

namespace hf::governance {
namespace {

constexpr auto kFair = PreemptionReason::kFairSharing;
constexpr auto kReclaim = PreemptionReason::kReclaim;

struct Victim {
  uint64_t id;
  PreemptionReason reason;
  bool operator==(const Victim& o) const { return id == o.id && reason == o.reason; }
};
std::ostream& operator<<(std::ostream& os, const Victim& v) {
  return os << v.id << ":" << PreemptionReasonName(v.reason);
}

class Cluster {
 public:
  explicit Cluster(bool fair = true,
                   std::vector<InstanceTypeCapacity> types = {{"unit", 1, 1, 0, 100}},
                   bool idle_sharing = false) {
    EXPECT_TRUE(e.SetCapacity(types).ok());
    policy.fair_share = fair;
    policy.idle_resource_sharing = idle_sharing;
    policy.priority_classes = {{"low", 10}, {"mid", 50}, {"high", 90}};
    EXPECT_TRUE(e.SetPolicy(policy).ok());
  }
  // Quotas are applied in name order, so team indexes (the tie-break after equal shares)
  // follow the names.
  TeamQuota& Team(const std::string& name, int64_t count, int weight = 1,
                  SharingStrategy s = SharingStrategy::kLendAndBorrow,
                  const std::string& type = "unit") {
    TeamQuota q;
    q.team = name;
    q.resources.push_back({type, count, {}, {}, {}});
    q.strategy = s;
    q.borrow_limit_percent = 10000;
    q.fair_share_weight = weight;
    quotas[name] = q;
    return quotas[name];
  }
  void Apply() {
    for (auto& [n, q] : quotas) ASSERT_TRUE(e.UpsertQuota(q).ok()) << n;
  }
  WorkloadSpec Spec(uint64_t id, const std::string& team, const std::string& cls, int count,
                    const std::string& type = "unit") {
    WorkloadSpec s;
    s.id = id;
    s.team = team;
    s.priority_class = cls;
    s.submit_time_ms = static_cast<int64_t>(id);
    s.instance_type = type;
    s.count = count;
    return s;
  }
  void Submit(const WorkloadSpec& s) { ASSERT_TRUE(e.Submit(s).ok()) << s.id; }
  void Submit(uint64_t id, const std::string& team, const std::string& cls, int count) {
    Submit(Spec(id, team, cls, count));
  }
  // Submits and admits at once, in a cycle of its own (so it is no candidate only because
  // it was admitted in the cycle of a later search).
  void Running(const WorkloadSpec& s) {
    Submit(s);
    CycleResult r = Cycle();
    ASSERT_EQ(r.admitted.size(), 1u) << s.id;
    ASSERT_EQ(r.admitted[0].id, s.id);
    ASSERT_TRUE(r.admitted[0].victims.empty()) << s.id;
  }
  void Running(uint64_t id, const std::string& team, const std::string& cls, int count) {
    Running(Spec(id, team, cls, count));
  }
  CycleResult Cycle() {
    CycleResult r = e.RunCycle(++now);
    const Status st = e.CheckConsistency();
    EXPECT_TRUE(st.ok()) << st;
    return r;
  }
  static std::vector<uint64_t> Admitted(const CycleResult& r) {
    std::vector<uint64_t> out;
    for (const auto& a : r.admitted) out.push_back(a.id);
    return out;
  }
  // Victims in the order the search chose them.
  static std::vector<Victim> Victims(const CycleResult& r) {
    std::vector<Victim> out;
    for (const auto& a : r.admitted)
      for (const auto& v : a.victims) out.push_back({v.victim, v.reason});
    return out;
  }
  int64_t Units(const std::string& team, const std::string& type = "unit") const {
    return e.Usage(team, type)[kVCpuMilli] / 1000;
  }

  Engine e;
  SchedulerPolicy policy;
  std::map<std::string, TeamQuota> quotas;
  int64_t now = 0;
};

using ::std::vector;

// ---- victim searches that fail after trial evictions ----

// A search that takes a victim in strategy 1, then runs out of targets, must leave every
// team's usage, share and borrower-set key as it found them. Units of "unit" (1 vCPU,
// 1 GiB); lendable L = 2 + 2 + 2 + 6 = 12 and every team has weight 1, so shares are
// borrowed units / 12 and are written below as borrowed units.
TEST(EnginePerfPaths, FailedSearchAfterTrialVictimRestoresEverything) {
  Cluster c;
  c.Team("a", 2);
  c.Team("b", 2);
  c.Team("c", 2);
  c.Team("lender", 6, 1, SharingStrategy::kLend);
  c.Apply();
  c.Running(1, "a", "", 2);
  c.Running(2, "b", "", 2);
  for (uint64_t id = 3; id <= 6; ++id) c.Running(id, "b", "", 1);  // b borrows 4
  c.Running(7, "c", "", 2);
  c.Running(8, "c", "", 1);
  c.Running(9, "c", "", 1);  // c borrows 2; the cohort is full
  // a asks for 3 (share 3). c's share 2 < 3 ends the walk. b: strategy 1 takes job 6
  // (3 ≤ 4 − 1), then job 5 fails (max(3, 1 + 1) = 3 > 4 − 2); strategy 2: 3 < 3 fails.
  // Only 1 freed < 3: the search fails and job 6 is put back.
  c.Submit(10, "a", "", 3);
  CycleResult r = c.Cycle();
  EXPECT_TRUE(r.admitted.empty());
  EXPECT_EQ(c.Units("a"), 2);
  EXPECT_EQ(c.Units("b"), 6);
  EXPECT_EQ(c.Units("c"), 4);
  // The borrower sets still rank b (4) above c (2): c's job asking for 1 more would reach
  // share 3 < b's 4, so b's newest job goes (strategy 1: 3 ≤ 4 − 1) — not c's own
  // (a Kueue target is never the preemptor's team, and c has no lower-priority jobs).
  c.Submit(11, "c", "", 1);
  r = c.Cycle();
  EXPECT_EQ(Cluster::Admitted(r), vector<uint64_t>{11});
  EXPECT_EQ(Cluster::Victims(r), (vector<Victim>{{6, kFair}}));
}

// The final justification (every kept fair-sharing victim's team, with the victim back,
// stays above the preemptor) fails after fill-back: the trial evictions of two teams are
// undone and their versions restored. Weights: a 1, b 2, c 1; shares in borrowed units
// ÷ weight (L = 53 for all). a (at nominal) asks for R = 10; the cohort is full.
//  b borrows 28 (share 14): jobs 2 (base), 20, then x = 8 (newest).
//  c borrows 17 (share 17): jobs 2 (base), 9, then y = 8 (newest).
// Strategy 1: c first (17): y gives mine max(10, 8) = 10 > 17 − 8 = 9, dropped. b (14): x
// gives 10 ≤ (28 − 8) / 2 = 10, taken (8 < 10 freed). b (10): its 20 job gives 28 > 0,
// dropped. Strategy 2: c (17): y gives max(10, 8 + 8) = 16 < 17, taken; 16 ≥ 10 fits.
// Fill-back keeps x (y alone frees 8 < 10). Justification for x: 16 < b's 28 / 2 = 14
// fails, so nothing is evicted and a's job waits.
TEST(EnginePerfPaths, FailedJustificationRestoresBothVictimTeams) {
  Cluster c;
  c.Team("a", 4, 1);
  c.Team("b", 2, 2);
  c.Team("c", 2, 1);
  c.Team("lender", 45, 1, SharingStrategy::kLend);
  c.Apply();
  c.Running(1, "a", "", 4);
  c.Running(2, "b", "", 2);
  c.Running(3, "b", "", 20);
  c.Running(4, "b", "", 8);  // x
  c.Running(5, "c", "", 2);
  c.Running(6, "c", "", 9);
  c.Running(7, "c", "", 8);  // y
  c.Submit(10, "a", "", 10);
  CycleResult r = c.Cycle();
  EXPECT_TRUE(r.admitted.empty());
  EXPECT_TRUE(Cluster::Victims(r).empty());
  EXPECT_EQ(c.Units("b"), 30);
  EXPECT_EQ(c.Units("c"), 19);
  // Releasing b's 20 job (b now borrows 8, share 4; c 17): a's job fits at once.
  ASSERT_TRUE(c.e.Remove(3).ok());
  r = c.Cycle();
  EXPECT_EQ(Cluster::Admitted(r), vector<uint64_t>{10});
  EXPECT_TRUE(Cluster::Victims(r).empty());
}

// Fill-back puts one team's trial victim back and keeps another's: the team whose victim
// returns ends at its old usage with its old borrower-set key; the other is re-keyed by
// the eviction. Same cohort as above but y = 10 alone covers R = 10.
// Strategy 1: c (share 19): y gives max(10, 10) = 10 > 19 − 10 = 9, dropped. b (14): x
// taken (10 ≤ 10); b (10): dropped. Strategy 2: c: max(10, 8 + 10) = 18 < 19, taken.
// Fill-back: x back, 10 free fits, so only y goes (justified: 10 < 19).
TEST(EnginePerfPaths, FillBackReturnsOneTeamsVictimAndKeepsAnothers) {
  Cluster c;
  c.Team("a", 4, 1);
  c.Team("b", 2, 2);
  c.Team("c", 2, 1);
  c.Team("lender", 47, 1, SharingStrategy::kLend);
  c.Apply();
  c.Running(1, "a", "", 4);
  c.Running(2, "b", "", 2);
  c.Running(3, "b", "", 20);
  c.Running(4, "b", "", 8);  // x
  c.Running(5, "c", "", 2);
  c.Running(6, "c", "", 9);
  c.Running(7, "c", "", 10);  // y
  c.Submit(10, "a", "", 10);
  CycleResult r = c.Cycle();
  EXPECT_EQ(Cluster::Admitted(r), vector<uint64_t>{10});
  EXPECT_EQ(Cluster::Victims(r), (vector<Victim>{{7, kFair}}));
  EXPECT_EQ(c.Units("b"), 30);
  EXPECT_EQ(c.Units("c"), 11);
  EXPECT_EQ(c.Units("a"), 14);
}

// ---- the lazy borrower-set walk and partial target loads ----

// Equal shares with different denominators (b: 2 borrowed at weight 1; c: 4 at weight 2)
// tie, and the tie goes to the lower team index ("b" is created first). The preemptor's
// share 1 is below both; strategy 1 takes the tied-first team's newest job.
TEST(EnginePerfPaths, EqualSharesWithDifferentWeightsTieByTeamIndex) {
  for (bool b_first : {true, false}) {
    SCOPED_TRACE(b_first);
    Cluster c;
    const std::string b = b_first ? "b" : "d";  // the weight-1 team: before or after "c"
    c.Team("a", 2, 1);
    c.Team(b, 2, 1);
    c.Team("c", 2, 2);
    c.Team("lender", 6, 1, SharingStrategy::kLend);
    c.Apply();
    c.Running(1, "a", "", 2);
    c.Running(2, b, "", 2);
    c.Running(3, b, "", 1);
    c.Running(4, b, "", 1);  // b borrows 2: share 2
    c.Running(5, "c", "", 2);
    for (uint64_t id = 6; id <= 9; ++id) c.Running(id, "c", "", 1);
    // c borrows 4 at weight 2: share 2; the cohort is full
    c.Submit(10, "a", "", 1);
    const CycleResult r = c.Cycle();
    EXPECT_EQ(Cluster::Admitted(r), vector<uint64_t>{10});
    // b: 1 ≤ 2 − 1; c: 1 ≤ (4 − 1) / 2: either qualifies, the order decides.
    EXPECT_EQ(Cluster::Victims(r), (vector<Victim>{{b_first ? 4u : 9u, kFair}}));
  }
}

// The walk of the borrower set adds an unreached team before a reached target whose share
// fell to a tie with it when the unreached team has the lower index. x (index 3) borrows 3,
// b (index 1) 2; a (weight 10) needs 2 with the cohort full. Strategy 1 takes x's newest
// (x falls to share 2, tied with b); b, the lower index, is served next and gives its
// newest: 1 + 1 frees the 2 a needs.
TEST(EnginePerfPaths, RekeyedTargetTiesWithUnreachedTeamByIndex) {
  Cluster c;
  c.Team("a", 2, 10);
  c.Team("b", 2, 1);
  c.Team("lender", 5, 1, SharingStrategy::kLend);
  c.Team("x", 2, 1);
  c.Apply();
  c.Running(1, "a", "", 2);
  c.Running(2, "b", "", 2);
  c.Running(3, "b", "", 1);
  c.Running(4, "b", "", 1);  // b borrows 2
  c.Running(5, "x", "", 2);
  for (uint64_t id = 6; id <= 8; ++id) c.Running(id, "x", "", 1);  // x borrows 3; full
  c.Submit(10, "a", "", 2);
  const CycleResult r = c.Cycle();
  EXPECT_EQ(Cluster::Admitted(r), vector<uint64_t>{10});
  EXPECT_EQ(Cluster::Victims(r), (vector<Victim>{{8, kFair}, {4, kFair}}));
}

// Shares that differ by far less than the double approximation's tolerance (1 MiB in
// 2^42) are ordered exactly: t2 borrows 2^42 + 1 MiB, t1 2^42 MiB, so t2 is served first
// although t1 has the lower index. The jobs request memory alone (a request on vCPU would
// make every team, below nominal there, no fair-sharing target).
// The preemptor p (weight 4) asks for 2^43 with 2^43 − 1 free: its share with the request,
// 2^43 / 4, is below both. Strategy 1 fails for both (their only borrowed job would leave
// them at 0); strategy 2 takes the first served team's job, and either would make room.
TEST(EnginePerfPaths, NearlyEqualHugeSharesOrderExactly) {
  constexpr int64_t kG = int64_t{1} << 42;  // MiB
  // One instance: 2 vCPU, 2^43 MiB; nominal 2 instances = 4 kG.
  Cluster c(true, {{"huge", 2, static_cast<double>(int64_t{1} << 33), 0, 64}});
  c.Team("lender", 2, 1, SharingStrategy::kLend, "huge");
  c.Team("p", 2, 4, SharingStrategy::kLendAndBorrow, "huge");
  c.Team("t1", 2, 1, SharingStrategy::kLendAndBorrow, "huge");
  c.Team("t2", 2, 1, SharingStrategy::kLendAndBorrow, "huge");
  c.Apply();
  auto job = [&](uint64_t id, const std::string& team, int64_t mib, int count) {
    WorkloadSpec s = c.Spec(id, team, "", count, "huge");
    s.per_pod = Resources{0, 0, mib};
    return s;
  };
  c.Running(job(1, "p", 2 * kG, 2));   // p at nominal
  c.Running(job(2, "t1", 2 * kG, 2));  // t1 at nominal
  c.Running(job(3, "t2", 2 * kG, 2));  // t2 at nominal
  c.Running(job(4, "t1", kG, 1));      // t1 borrows kG
  c.Running(job(5, "t2", kG + 1, 1));  // t2 borrows kG + 1: 16 kG − 14 kG − 1 free
  EXPECT_EQ(c.e.Usage("t2", "huge")[kMemoryMiB], 5 * kG + 1);
  c.Submit(job(10, "p", 2 * kG, 1));
  const CycleResult r = c.Cycle();
  EXPECT_EQ(Cluster::Admitted(r), vector<uint64_t>{10});
  EXPECT_EQ(Cluster::Victims(r), (vector<Victim>{{5, kFair}}));
}

// A target team holding many admitted jobs is loaded with its first candidate only; the
// rest are loaded when that one is taken. Strategy 1 then takes several of the team's jobs
// in candidate order: lower priority first, then the most recently admitted.
// b (weight 1, nominal 2) borrows 8 in 1-unit jobs: low 3, 4, 5 then mid 6..10; a (weight
// 4, nominal 2, at nominal) asks for 4: its share 4 / 4 = 1 (in units of 1/L). Each step:
// mine = max(4, freed + 1) / 4 ≤ b's borrowed after the step, so b gives up to 4 jobs:
// low 5, 4, 3 (newest first), then mid 10.
TEST(EnginePerfPaths, PartialTargetLoadTakesSeveralInCandidateOrder) {
  Cluster c;
  c.Team("a", 2, 4);
  c.Team("b", 2, 1);
  c.Team("lender", 8, 1, SharingStrategy::kLend);
  c.Apply();
  c.Running(1, "a", "", 2);
  c.Running(2, "b", "high", 2);
  for (uint64_t id = 3; id <= 5; ++id) c.Running(id, "b", "low", 1);
  for (uint64_t id = 6; id <= 10; ++id) c.Running(id, "b", "mid", 1);  // the cohort is full
  c.Submit(20, "a", "", 4);
  const CycleResult r = c.Cycle();
  EXPECT_EQ(Cluster::Admitted(r), vector<uint64_t>{20});
  EXPECT_EQ(Cluster::Victims(r),
            (vector<Victim>{{5, kFair}, {4, kFair}, {3, kFair}, {10, kFair}}));
}

// A target's front candidate is passed over once an earlier victim of its team has left
// the team too close to nominal; the team's next, smaller candidate still qualifies.
// b (nominal 4, weight 1) runs, in admission order, mid 2, low 1 (j2), low 2 (j3), low 1
// (j4): usage 6, borrows 2. Candidate order: low newest first (j4, j3, j2), then mid.
// a (nominal 2, weight 10, at nominal) asks for 2; shares in units of 1/L (L = 8).
// Strategy 1: j4: max(2, 1) / 10 ≤ 1, taken (b at 5). j3 would leave b at 3 < 4: passed
// over. j2: max(2, 2) / 10 ≤ 0 fails, b dropped. Strategy 2: j2: 0.2 < 1, taken; fits.
TEST(EnginePerfPaths, PassedOverFrontThenSmallerCandidateOfSameTeam) {
  Cluster c;
  c.Team("a", 2, 10);
  c.Team("b", 4, 1);
  c.Team("lender", 2, 1, SharingStrategy::kLend);
  c.Apply();
  c.Running(1, "a", "", 2);
  c.Running(2, "b", "mid", 2);
  c.Running(3, "b", "low", 1);  // j2
  c.Running(4, "b", "low", 2);  // j3
  c.Running(5, "b", "low", 1);  // j4; the cohort is full
  c.Submit(10, "a", "", 2);
  const CycleResult r = c.Cycle();
  EXPECT_EQ(Cluster::Admitted(r), vector<uint64_t>{10});
  EXPECT_EQ(Cluster::Victims(r), (vector<Victim>{{5, kFair}, {3, kFair}}));
  EXPECT_EQ(c.Units("b"), 4);
}

// A preemptor that stays within nominal reclaims from a borrowing team, with fair sharing
// (FairSearch) and without (one candidate heap over all target teams): the candidates are
// every admitted job of the team, lower priority first, newest first.
// a (nominal 4) runs 1 and asks for 3; b (nominal 2) borrows 4: high 2 (base), low 1 (j3),
// mid 1 (j4), low 1 (j5), high 1 (j6). Order: j5, j3, j4, j6, base; three go.
TEST(EnginePerfPaths, ReclaimWithinNominalTakesCandidatesInOrder) {
  for (bool fair : {true, false}) {
    SCOPED_TRACE(fair);
    Cluster c(fair);
    c.Team("a", 4, 1);
    c.Team("b", 2, 1);
    c.Team("lender", 1, 1, SharingStrategy::kLend);
    c.Apply();
    c.Running(1, "a", "", 1);
    c.Running(2, "b", "high", 2);
    c.Running(3, "b", "low", 1);
    c.Running(4, "b", "mid", 1);
    c.Running(5, "b", "low", 1);
    c.Running(6, "b", "high", 1);  // the cohort (7) is full
    c.Submit(10, "a", "", 3);
    const CycleResult r = c.Cycle();
    EXPECT_EQ(Cluster::Admitted(r), vector<uint64_t>{10});
    EXPECT_EQ(Cluster::Victims(r),
              (vector<Victim>{{5, kReclaim}, {3, kReclaim}, {4, kReclaim}}));
  }
}

// ---- the fair-sharing queue skip ----

// A queue that failed only the fair-sharing test (no other borrower's share reaches its
// team's share with the request) is skipped while its team is unchanged, the type's free
// quota stays short and no other share reaches that floor. Here another team's share
// rises to the floor while the free quota falls: the queue must be scanned, and its job
// now preempts. Units of "unit"; L = 10, weights 1; shares in borrowed units.
TEST(EnginePerfPaths, QueueSkipEndsWhenAnotherShareReachesTheFloor) {
  Cluster c;
  c.Team("a", 2);
  c.Team("b", 2);
  c.Team("d", 2, 1, SharingStrategy::kDontLend);  // its releases rescan without freeing
  c.Team("lender", 6, 1, SharingStrategy::kLend);
  c.Apply();
  c.Running(1, "a", "", 2);
  c.Running(2, "b", "high", 2);
  c.Running(3, "b", "low", 3);  // b borrows 3: share 3; 3 free
  c.Running(4, "d", "", 1);
  c.Running(5, "d", "", 1);
  // a asks for 4 (share 4 with it): 3 free < 4 and b's 3 < 4.
  c.Submit(10, "a", "", 4);
  EXPECT_TRUE(c.Cycle().admitted.empty());
  // A release on the type scans a's queue whole: it fails again (the skip is recorded).
  ASSERT_TRUE(c.e.Remove(4).ok());
  EXPECT_TRUE(c.Cycle().admitted.empty());
  // b borrows 2 more: share 5 ≥ 4, 1 free. a's team did not change.
  c.Running(11, "b", "high", 2);
  // The next whole scan must not skip a's queue: strategy 1 fails for b's low job
  // (max(4, 3) > 5 − 3), strategy 2 takes it (4 < 5) and 1 + 3 fits.
  ASSERT_TRUE(c.e.Remove(5).ok());
  const CycleResult r = c.Cycle();
  EXPECT_EQ(Cluster::Admitted(r), vector<uint64_t>{10});
  EXPECT_EQ(Cluster::Victims(r), (vector<Victim>{{3, kFair}}));
}

// ---- the cached NeverFits bound ----

// The bound min(local + lendable of the cohort, nominal + borrow limit) follows every
// configuration change: another team's quota, the team's own borrow limit, removing a
// quota, and (IdleResourceSharing) the cluster's capacity.
TEST(EnginePerfPaths, NeverFitsBoundFollowsConfiguration) {
  Cluster c;
  c.Team("a", 2);
  c.Apply();
  c.Submit(1, "a", "", 5);  // cohort lendable 2 < 5
  CycleResult r = c.Cycle();
  EXPECT_EQ(r.never_fits, vector<uint64_t>{1});
  // Another team lends 6: lendable 8, a's bound min(8, 2 + 200) = 8.
  c.Team("lender", 6, 1, SharingStrategy::kLend);
  c.Apply();
  r = c.Cycle();
  EXPECT_EQ(Cluster::Admitted(r), vector<uint64_t>{1});
  // a's own borrow limit to 0: its bound is its nominal 2.
  c.quotas["a"].borrow_limit_percent = 0;
  c.Apply();
  c.Submit(2, "a", "", 3);
  r = c.Cycle();
  EXPECT_EQ(r.never_fits, vector<uint64_t>{2});
  // Back to a large borrow limit, but the lender's quota goes: bound min(2, 202) = 2 < 3,
  // still never fits. With job 1 gone and the lender back (bound 8) it is admitted.
  c.quotas["a"].borrow_limit_percent = 10000;
  c.Apply();
  ASSERT_TRUE(c.e.RemoveQuota("lender").ok());
  r = c.Cycle();
  EXPECT_TRUE(r.admitted.empty());
  ASSERT_TRUE(c.e.Remove(1).ok());
  c.Apply();  // the lender again
  r = c.Cycle();
  EXPECT_EQ(Cluster::Admitted(r), vector<uint64_t>{2});
}

TEST(EnginePerfPaths, NeverFitsBoundFollowsCapacityUnderIdleSharing) {
  Cluster c(true, {{"unit", 1, 1, 0, 10}}, /*idle_sharing=*/true);
  c.Team("a", 2);
  c.Apply();
  c.Submit(1, "a", "", 12);  // bound min(2 + 8 idle, 202) = 10
  CycleResult r = c.Cycle();
  EXPECT_EQ(r.never_fits, vector<uint64_t>{1});
  ASSERT_TRUE(c.e.SetCapacity({{"unit", 1, 1, 0, 20}}).ok());  // bound 20
  r = c.Cycle();
  EXPECT_EQ(Cluster::Admitted(r), vector<uint64_t>{1});
  EXPECT_TRUE(c.e.CheckConsistency().ok());
}

// ---- the stream merge (Advance drops closed classes) ----

// One team's queue of many classes, some closing mid-walk (never fits), is still merged in
// queue order: priority, then submission. Quota 10, no one to borrow from.
TEST(EnginePerfPaths, StreamMergeKeepsQueueOrderWhileClassesClose) {
  Cluster c;
  c.Team("a", 10);
  c.Apply();
  c.Submit(1, "a", "high", 20);  // never fits
  c.Submit(2, "a", "low", 1);
  c.Submit(3, "a", "mid", 2);
  c.Submit(4, "a", "high", 1);
  c.Submit(5, "a", "mid", 11);  // never fits
  c.Submit(6, "a", "low", 3);
  c.Submit(7, "a", "mid", 1);
  c.Submit(8, "a", "mid", 2);  // same class as 3
  c.Submit(9, "a", "low", 5);  // no room left
  const CycleResult r = c.Cycle();
  EXPECT_EQ(Cluster::Admitted(r), (vector<uint64_t>{4, 3, 7, 8, 2, 6}));
  EXPECT_EQ(r.never_fits, (vector<uint64_t>{1, 5}));
  EXPECT_EQ(c.Units("a"), 10);
}

}  // namespace
}  // namespace hf::governance
