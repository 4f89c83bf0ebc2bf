// The job ledger's closed-form accounting, case by case (τ = 10 work minutes, δ = 1 minute
// unless a case says otherwise).
#include "hyperfleet/sim/job_ledger.h"

#include <cmath>
#include <numeric>

#include <gtest/gtest.h>

namespace hf::sim {
namespace {

double LossOf(const JobLedger& l, Loss k) { return l.losses()[static_cast<int>(k)]; }

// Everything is accounted: productive + losses = wall.
void ExpectConserved(const JobLedger& l) {
  const double sum = std::accumulate(l.losses().begin(), l.losses().end(), l.productive_min());
  EXPECT_NEAR(sum, l.wall_min(), 1e-9);
}

TEST(JobLedgerTest, FailureFreeRunPaysOnlyCheckpointStalls) {
  JobLedger l(CheckpointPolicy{10, 1, 0});
  l.Run(0);
  l.Finish(110);  // 10 cycles of 11 min
  EXPECT_NEAR(l.productive_min(), 100, 1e-9);
  EXPECT_NEAR(LossOf(l, Loss::kCheckpoint), 10, 1e-9);
  EXPECT_TRUE(l.interruptions().empty());
  ExpectConserved(l);
}

struct StopCase {
  const char* name;
  double stop_at;      // failure time (run from 0)
  double rework;       // expected work lost
  double checkpoint;   // expected stall minutes up to the stop
};

// A failure loses the work since the last durable checkpoint, including a stall in progress.
TEST(JobLedgerTest, StopLosesWorkSinceTheLastDurableCheckpoint) {
  const StopCase cases[] = {
      {"mid first cycle", 4, 4, 0},
      {"end of work, before the stall", 10, 10, 0},
      {"inside the first stall", 10.5, 10, 0.5},
      {"right after the first checkpoint", 11, 0, 1},
      {"mid third cycle", 25.5, 3.5, 2},
      {"many cycles then mid stall", 11 * 7 + 10.25, 10, 7.25},
  };
  for (const StopCase& c : cases) {
    JobLedger l(CheckpointPolicy{10, 1, 0});
    l.Run(0);
    l.Stop(c.stop_at, StopClass::kD1, Loss::kDetection);
    l.Run(c.stop_at + 5);
    l.Finish(c.stop_at + 5);
    EXPECT_NEAR(LossOf(l, Loss::kRework), c.rework, 1e-9) << c.name;
    EXPECT_NEAR(LossOf(l, Loss::kCheckpoint), c.checkpoint, 1e-9) << c.name;
    EXPECT_NEAR(LossOf(l, Loss::kDetection), 5, 1e-9) << c.name;
    ASSERT_EQ(l.interruptions().size(), 1u) << c.name;
    EXPECT_NEAR(l.interruptions()[0].downtime_min, 5, 1e-9) << c.name;
    ExpectConserved(l);
  }
}

TEST(JobLedgerTest, RecoveryPhasesAreChargedToTheirLosses) {
  JobLedger l(CheckpointPolicy{10, 0, 0});
  l.Run(0);
  l.Stop(5, StopClass::kD2, Loss::kDetection);
  l.Phase(6, Loss::kLocalization);
  l.Phase(8, Loss::kWaitNode);
  l.Phase(11, Loss::kRestart);
  l.Run(15);
  l.Finish(20);
  EXPECT_NEAR(LossOf(l, Loss::kDetection), 1, 1e-9);
  EXPECT_NEAR(LossOf(l, Loss::kLocalization), 2, 1e-9);
  EXPECT_NEAR(LossOf(l, Loss::kWaitNode), 3, 1e-9);
  EXPECT_NEAR(LossOf(l, Loss::kRestart), 4, 1e-9);
  EXPECT_NEAR(LossOf(l, Loss::kRework), 5, 1e-9);
  EXPECT_NEAR(l.productive_min(), 5, 1e-9);
  EXPECT_EQ(l.interruptions()[0].cls, StopClass::kD2);
  ExpectConserved(l);
}

TEST(JobLedgerTest, PlannedStopKeepsTheWork) {
  JobLedger l(CheckpointPolicy{10, 1, 0});
  l.Run(0);
  l.Stop(7, StopClass::kPlanned, Loss::kPlanned);
  l.Run(9);
  l.Finish(9);
  EXPECT_NEAR(l.productive_min(), 7, 1e-9);
  EXPECT_NEAR(LossOf(l, Loss::kRework), 0, 1e-9);
  EXPECT_NEAR(LossOf(l, Loss::kPlanned), 2, 1e-9);
}

// Async checkpoints: durable only `persist` after the stall; a failure inside that window
// loses the previous interval too.
TEST(JobLedgerTest, AsyncPersistWindowLosesThePreviousIntervalToo) {
  struct Case {
    double stop_at, rework;
  };
  for (const Case& c : {Case{12, 11}, Case{13.5, 2.5}, Case{11 + 11 + 1, 11}}) {
    JobLedger l(CheckpointPolicy{10, 1, 2});
    l.Run(0);
    l.Stop(c.stop_at, StopClass::kD1, Loss::kDetection);
    l.Finish(c.stop_at);
    EXPECT_NEAR(LossOf(l, Loss::kRework), c.rework, 1e-9) << "stop at " << c.stop_at;
    ExpectConserved(l);
  }
}

TEST(JobLedgerTest, SlowdownStretchesWorkAndChargesFailSlow) {
  JobLedger l(CheckpointPolicy{10, 0, 0});
  l.Run(0);
  l.SetSlowdown(10, 1.25);
  l.SetSlowdown(35, 1.0);
  l.Finish(45);
  EXPECT_NEAR(l.productive_min(), 10 + 20 + 10, 1e-9);
  EXPECT_NEAR(LossOf(l, Loss::kFailSlow), 5, 1e-9);
  ExpectConserved(l);
}

// Silent corruption: work from the corruption to its detection is rolled back (SDC), the
// work before it since the last checkpoint is rework; checkpoints in between are not good.
TEST(JobLedgerTest, CorruptionRollsBackPastIt) {
  JobLedger l(CheckpointPolicy{10, 0, 0});
  l.Run(0);
  l.Corrupt(14);
  l.Stop(47, StopClass::kD5, Loss::kLocalization);
  l.Finish(50);
  EXPECT_NEAR(LossOf(l, Loss::kRework), 4, 1e-9);
  EXPECT_NEAR(LossOf(l, Loss::kSdcRollback), 33, 1e-9);
  EXPECT_NEAR(l.productive_min(), 10, 1e-9);
  ExpectConserved(l);
}

// The corruption outlives an unrelated failure (the job restarts from a bad checkpoint) and
// is rolled back at its detection, across the restart.
TEST(JobLedgerTest, CorruptionOutlivesOtherStops) {
  struct Case {
    const char* name;
    double other_stop, rework, sdc;
  };
  // Corrupt at 14 (4 min into the second cycle); another fault at `other_stop`; restart 3 min
  // later; the corruption detected 15 min after the restart. Only [0, 10) is ever kept.
  for (const Case& c : {Case{"after a bad checkpoint", 27, 7 + 4, 6 + 15},
                        Case{"before any bad checkpoint", 17, 7, 15}}) {
    JobLedger l(CheckpointPolicy{10, 0, 0});
    l.Run(0);
    l.Corrupt(14);
    l.Stop(c.other_stop, StopClass::kD1, Loss::kDetection);
    EXPECT_TRUE(l.corrupt()) << c.name;
    l.Run(c.other_stop + 3);
    l.Stop(c.other_stop + 18, StopClass::kD5, Loss::kLocalization);
    EXPECT_FALSE(l.corrupt()) << c.name;
    l.Finish(c.other_stop + 20);
    EXPECT_NEAR(LossOf(l, Loss::kRework), c.rework, 1e-9) << c.name;
    EXPECT_NEAR(LossOf(l, Loss::kSdcRollback), c.sdc, 1e-9) << c.name;
    EXPECT_NEAR(l.productive_min(), 10, 1e-9) << c.name;
    EXPECT_EQ(l.interruptions().size(), 2u) << c.name;
    ExpectConserved(l);
  }
}

TEST(JobLedgerTest, SlidingWindowMinimumSeesTheWorstHour) {
  JobLedger l(CheckpointPolicy{1000, 0, 0});  // no checkpoint: a stop loses everything
  l.Run(0);
  l.Stop(100, StopClass::kD1, Loss::kDetection);  // 100 min of work lost
  l.Run(130);
  l.Finish(400);
  // The worst hour lies inside [0, 130): no kept work at all.
  EXPECT_NEAR(l.MinWindowEttr(60), 0.0, 1e-9);
  JobLedger k(CheckpointPolicy{10, 0, 0});
  k.Run(0);
  k.Stop(200, StopClass::kD1, Loss::kDetection);
  k.Run(230);
  k.Finish(600);
  EXPECT_NEAR(k.MinWindowEttr(60), 0.5, 1e-9) << "30 min down in the worst hour";
}

// Against a brute-force scan: with δ = 0 and τ = 10, a run from r stopped at s keeps exactly
// [r, r + 10·⌊(s − r)/10⌋) at full speed.
TEST(JobLedgerTest, SlidingWindowMinimumMatchesABruteForceScan) {
  JobLedger l(CheckpointPolicy{10, 0, 0});
  std::vector<std::pair<double, double>> kept;
  uint64_t x = 12345;
  auto next = [&x](double lo, double hi) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * static_cast<double>(x >> 11) * 0x1.0p-53;
  };
  double t = 0;
  for (int i = 0; i < 40; ++i) {
    const double run = t, stop = run + next(5, 90);
    l.Run(run);
    l.Stop(stop, StopClass::kD1, Loss::kDetection);
    kept.emplace_back(run, run + 10 * std::floor((stop - run) / 10));
    t = stop + next(1, 40);
  }
  l.Finish(t);
  auto work_to = [&](double y) {
    double w = 0;
    for (const auto& [a, b] : kept) w += std::max(0.0, std::min(y, b) - a);
    return w;
  };
  double brute = 1e9;
  for (double a = 0; a + 60 <= t; a += 0.05) {
    brute = std::min(brute, (work_to(a + 60) - work_to(a)) / 60);
  }
  const double got = l.MinWindowEttr(60);
  EXPECT_LE(got, brute + 1e-9);
  EXPECT_NEAR(got, brute, 0.002);
}

TEST(JobLedgerTest, RejectsBadPolicyAndTimeGoingBack) {
  EXPECT_THROW(JobLedger(CheckpointPolicy{0, 1, 0}), std::invalid_argument);
  JobLedger l(CheckpointPolicy{10, 1, 0});
  l.Run(5);
  EXPECT_THROW(l.Stop(4, StopClass::kD1, Loss::kDetection), std::invalid_argument);
}

}  // namespace
}  // namespace hf::sim
