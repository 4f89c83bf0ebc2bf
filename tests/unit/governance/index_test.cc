// The engine's incremental indexes (per-type borrower sets ordered by weighted share, the
// pending equivalence classes and their summaries, per-class admitted usage) against a
// brute-force recomputation (Engine::CheckConsistency) after every event of seeded random
// sequences: submissions of many sizes and classes, finishes, cancels, cycles with
// preemptions, quota, weight, activation and policy changes. A stale index would only show
// in the trace tests as a slightly different decision; here it fails at the event.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "hyperfleet/governance/checker.h"
#include "hyperfleet/governance/engine.h"

namespace hf::governance {
namespace {

class RandomOps {
 public:
  RandomOps(uint64_t seed, bool fair) : rng_(seed) {
    types_ = {{"unit", 1, 1, 0, 40}, {"gpu", 8, 64, 4, 10}, {"big", 16, 128, 8, 6}};
    EXPECT_TRUE(e_.SetCapacity(types_).ok());
    policy_.fair_share = fair;
    policy_.idle_resource_sharing = Pick(2) == 0;
    policy_.priority_classes = {{"low", 10}, {"mid", 50}, {"high", 90}};
    EXPECT_TRUE(e_.SetPolicy(policy_).ok());
    for (int t = 0; t < 8; ++t) EXPECT_TRUE(e_.UpsertQuota(RandomQuota(t)).ok());
  }

  // One random event; returns the engine's verdict on its indexes afterwards.
  Status Step() {
    const int op = Pick(100);
    if (op < 45) {
      WorkloadSpec s;
      s.id = next_id_++;
      s.team = TeamName(Pick(8));
      s.priority_class = Pick(4) == 0 ? "" : policy_.priority_classes[Pick(3)].name;
      s.submit_time_ms = now_ + Pick(3);
      s.instance_type = types_[Pick(3)].name;
      s.count = 1 + Pick(Pick(4) == 0 ? 12 : 3);
      if (Pick(3) == 0) s.per_pod = Resources{0, 1000 * (1 + Pick(2)), 1024};
      if (e_.Submit(s).ok()) live_.push_back(s.id);
    } else if (op < 65 && !live_.empty()) {
      const size_t i = Pick(static_cast<int>(live_.size()));
      (void)e_.Remove(live_[i]);
      live_[i] = live_.back();
      live_.pop_back();
    } else if (op < 93) {
      now_ += 1000;
      (void)e_.RunCycle(now_);
    } else if (op < 98) {
      const int t = Pick(8);
      if (Pick(6) == 0) (void)e_.RemoveQuota(TeamName(t));
      else (void)e_.UpsertQuota(RandomQuota(t));
    } else {
      // Reweighted and reordered classes: buckets are rebuilt.
      for (auto& pc : policy_.priority_classes) pc.weight = Pick(101);
      EXPECT_TRUE(e_.SetPolicy(policy_).ok());
    }
    return e_.CheckConsistency();
  }

  Engine& engine() { return e_; }

 private:
  int Pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  static std::string TeamName(int t) { return "team-" + std::to_string(t); }
  TeamQuota RandomQuota(int t) {
    TeamQuota q;
    q.team = TeamName(t);
    for (const auto& ty : types_)
      if (Pick(3) != 0) q.resources.push_back({ty.name, 1 + Pick(6), {}, {}, {}});
    if (q.resources.empty()) q.resources.push_back({"unit", 4, {}, {}, {}});
    const SharingStrategy strategies[] = {SharingStrategy::kLendAndBorrow,
                                          SharingStrategy::kLend, SharingStrategy::kDontLend};
    q.strategy = strategies[Pick(5) < 3 ? 0 : 1 + Pick(2)];
    q.borrow_limit_percent = 50 * (1 + Pick(6));
    q.fair_share_weight = Pick(4) == 0 ? 0 : 1 + Pick(100);
    q.active = Pick(12) != 0;
    q.preempt_team_tasks =
        Pick(4) == 0 ? PreemptTeamTasks::kNever : PreemptTeamTasks::kLowerPriority;
    return q;
  }

  std::mt19937_64 rng_;
  Engine e_;
  std::vector<InstanceTypeCapacity> types_;
  SchedulerPolicy policy_;
  std::vector<uint64_t> live_;
  uint64_t next_id_ = 1;
  int64_t now_ = 0;
};

TEST(GovernanceIndexes, MatchBruteForceAfterEveryEvent) {
  for (bool fair : {true, false}) {
    for (uint64_t seed = 1; seed <= 12; ++seed) {
      RandomOps ops(seed, fair);
      for (int i = 0; i < 1500; ++i) {
        const Status st = ops.Step();
        ASSERT_TRUE(st.ok()) << (fair ? "fair" : "fcfs") << " seed " << seed << " step " << i
                             << ": " << st.ToString();
      }
      EXPECT_GT(ops.engine().AdmittedCount(), 0) << "seed " << seed;
    }
  }
}

// Event mixes aimed at the paths added on 2026-11-30 (later rounds, lazy class cursors with
// head keys in BucketInfo, AdmittedKey next to the admitted lists, the MayAdmit re-check):
// small clusters so most cycles preempt; class sets that are reordered, shrunk and grown
// while jobs are admitted and pending (keys must follow the renumbering); quotas removed
// and re-created mid-trace; pending heads and this cycle's victims removed right after the
// cycle (a class whose only members were victims); DontLend-heavy teams. CheckConsistency
// after every event, and the independent InvariantChecker after every cycle.
class StressOps {
 public:
  StressOps(uint64_t seed, bool fair)
      : rng_(seed),
        types_{{"unit", 1, 1, 0, 6 + static_cast<int64_t>(seed % 5)},
               {"gpu", 8, 64, 4, 3}},
        checker_(types_, SchedulerPolicy{}) {
    EXPECT_TRUE(e_.SetCapacity(types_).ok());
    policy_.fair_share = fair;
    policy_.idle_resource_sharing = Pick(2) == 0;
    policy_.priority_classes = {{"low", 10}, {"mid", 50}, {"high", 90}};
    EXPECT_TRUE(e_.SetPolicy(policy_).ok());
    checker_.SetPolicy(policy_);
    for (int t = 0; t < 4; ++t) Upsert(t);
  }

  Status Step() {
    const int op = Pick(100);
    if (op < 40) {
      WorkloadSpec s;
      s.id = next_id_++;
      s.team = TeamName(Pick(4));
      const auto& pcs = policy_.priority_classes;
      s.priority_class = pcs.empty() || Pick(5) == 0 ? "" : pcs[Pick(pcs.size())].name;
      if (!s.priority_class.empty() && Pick(4) == 0) s.priority_class += "-priority";
      s.submit_time_ms = now_ - Pick(3) * 1000;  // ties and out-of-order submissions
      s.instance_type = types_[Pick(2)].name;
      s.count = 1 + Pick(Pick(4) == 0 ? 5 : 2);
      if (Pick(4) == 0) s.per_pod = Resources{0, 500 * (1 + Pick(2)), 512};
      if (e_.Submit(s).ok()) {
        checker_.Submitted(s);
        live_.push_back(s.id);
      }
    } else if (op < 52 && !live_.empty()) {
      RemoveAt(Pick(live_.size()));
    } else if (op < 58 && !last_victims_.empty()) {
      // A victim of the last cycle leaves before it is reconsidered.
      const uint64_t id = last_victims_[Pick(last_victims_.size())];
      for (size_t i = 0; i < live_.size(); ++i)
        if (live_[i] == id) RemoveAt(i);
    } else if (op < 85) {
      Cycle();
    } else if (op < 93) {
      const int t = Pick(4);
      if (Pick(4) == 0) {
        if (e_.RemoveQuota(TeamName(t)).ok()) checker_.RemoveQuota(TeamName(t));
      } else {
        Upsert(t);
      }
    } else {
      ReshapePolicy();
    }
    if (!live_.empty()) {
      // Explain reads the classes' head keys and queue positions.
      auto why = e_.Explain(live_[Pick(live_.size())]);
      if (!why.ok()) return why.status();
      if (why->jobs_ahead < 0 || why->first_ahead.size() > 10)
        return absl::InternalError("Explain: bad queue position");
    }
    return e_.CheckConsistency();
  }

  void Cycle() {
    now_ += 1000;
    const CycleResult r = e_.RunCycle(now_);
    checker_.CheckCycle(r, e_, /*full=*/true);
    last_victims_.clear();
    for (const auto& a : r.admitted)
      for (const auto& v : a.victims) last_victims_.push_back(v.victim);
  }

  Engine& engine() { return e_; }
  InvariantChecker& checker() { return checker_; }

 private:
  size_t Pick(size_t n) { return static_cast<size_t>(rng_() % n); }
  int Pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  static std::string TeamName(int t) { return "team-" + std::to_string(t); }

  void RemoveAt(size_t i) {
    if (e_.Remove(live_[i]).ok()) checker_.Removed(live_[i]);
    live_[i] = live_.back();
    live_.pop_back();
  }

  void Upsert(int t) {
    TeamQuota q;
    q.team = TeamName(t);
    for (const auto& ty : types_)
      if (Pick(3) != 0) q.resources.push_back({ty.name, 1 + Pick(2), {}, {}, {}});
    if (q.resources.empty()) q.resources.push_back({"unit", 1, {}, {}, {}});
    const SharingStrategy strategies[] = {SharingStrategy::kLendAndBorrow,
                                          SharingStrategy::kLend, SharingStrategy::kDontLend};
    q.strategy = strategies[Pick(3)];
    q.borrow_limit_percent = 50 * Pick(5);
    q.fair_share_weight = Pick(4) == 0 ? 0 : 1 + Pick(100);
    q.active = Pick(10) != 0;
    q.preempt_team_tasks =
        Pick(5) == 0 ? PreemptTeamTasks::kNever : PreemptTeamTasks::kLowerPriority;
    if (e_.UpsertQuota(q).ok()) checker_.UpsertQuota(q);
  }

  // Reorders, reweights, drops or adds classes: every class index may change.
  void ReshapePolicy() {
    auto& pcs = policy_.priority_classes;
    const int what = Pick(4);
    if (what == 0 && pcs.size() > 1) {
      std::swap(pcs[0], pcs[Pick(pcs.size())]);
    } else if (what == 1 && !pcs.empty()) {
      pcs.erase(pcs.begin() + Pick(pcs.size()));
    } else if (what == 2 && pcs.size() < 5) {
      pcs.insert(pcs.begin() + Pick(pcs.size() + 1),
                 PriorityClass{"c" + std::to_string(next_class_++), Pick(101)});
    } else {
      for (auto& pc : pcs) pc.weight = Pick(101);
    }
    EXPECT_TRUE(e_.SetPolicy(policy_).ok());
    checker_.SetPolicy(policy_);
  }

  std::mt19937_64 rng_;
  std::vector<InstanceTypeCapacity> types_;
  Engine e_;
  InvariantChecker checker_;
  SchedulerPolicy policy_;
  std::vector<uint64_t> live_, last_victims_;
  uint64_t next_id_ = 1;
  int next_class_ = 0;
  int64_t now_ = 10'000;
};

// Seeds and events per seed; HF_STRESS_SEEDS / HF_STRESS_STEPS raise them for a longer hunt
// (800 × 2000 ran clean on 2026-11-30, 74 s).
int StressKnob(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : fallback;
}

TEST(GovernanceIndexes, StressNewPathsConsistentAndChecked) {
  const int seeds = StressKnob("HF_STRESS_SEEDS", 40), steps = StressKnob("HF_STRESS_STEPS", 2000);
  for (bool fair : {true, false}) {
    for (int seed = 1; seed <= seeds; ++seed) {
      StressOps ops(static_cast<uint64_t>(seed), fair);
      for (int i = 0; i < steps; ++i) {
        const Status st = ops.Step();
        ASSERT_TRUE(st.ok()) << (fair ? "fair" : "fcfs") << " seed " << seed << " step " << i
                             << ": " << st.ToString();
      }
      ops.Cycle();
      ASSERT_EQ(ops.checker().violations(), 0)
          << (fair ? "fair" : "fcfs") << " seed " << seed << ": "
          << (ops.checker().messages().empty() ? "" : ops.checker().messages()[0]);
    }
  }
}

// Explain's queue position comes from the equivalence classes: jobs ahead are the team's
// pending jobs of higher priority, or of equal priority submitted earlier, on every type.
TEST(GovernanceIndexes, ExplainCountsJobsAheadAcrossClasses) {
  Engine e;
  ASSERT_TRUE(e.SetCapacity({{"unit", 1, 1, 0, 4}}).ok());
  SchedulerPolicy p;
  p.priority_classes = {{"low", 10}, {"high", 90}};
  ASSERT_TRUE(e.SetPolicy(p).ok());
  TeamQuota q;
  q.team = "a";
  q.resources.push_back({"unit", 4, {}, {}, {}});
  q.strategy = SharingStrategy::kDontLend;
  q.preempt_team_tasks = PreemptTeamTasks::kNever;  // job 1 keeps the whole quota
  ASSERT_TRUE(e.UpsertQuota(q).ok());
  auto submit = [&](uint64_t id, const char* cls, int count, int64_t ts) {
    WorkloadSpec s;
    s.id = id;
    s.team = "a";
    s.priority_class = cls;
    s.submit_time_ms = ts;
    s.instance_type = "unit";
    s.count = count;
    ASSERT_TRUE(e.Submit(s).ok());
  };
  submit(1, "low", 4, 0);   // admitted, fills the quota
  (void)e.RunCycle(0);
  submit(2, "low", 2, 1);
  submit(3, "high", 3, 5);
  submit(4, "low", 1, 2);
  submit(5, "high", 3, 3);
  submit(6, "low", 2, 0);
  (void)e.RunCycle(1);
  auto why = e.Explain(4);
  ASSERT_TRUE(why.ok());
  EXPECT_EQ(why->verdict, Verdict::kWaiting);
  // Ahead of 4 (low, t=2): 5 and 3 (high), 6 (low, t=0), 2 (low, t=1).
  EXPECT_EQ(why->jobs_ahead, 4);
  EXPECT_EQ(why->first_ahead, (std::vector<uint64_t>{2, 3, 5, 6}));
  ASSERT_TRUE(e.CheckConsistency().ok());
}

}  // namespace
}  // namespace hf::governance
