// The product engine: the real controller and store against the simulated world.
#include "hyperfleet/sim/product/product_engine.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace hf::sim::product {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

/// A small fleet without failures of its own (faults are injected): 4 job nodes, 1 spare.
FgufParams Small() {
  FgufParams p = FgufParams::PurePoisson();
  p.fleet_nodes = 8;
  p.job_nodes = 4;
  p.rate_per_1000_node_days = 0;
  p.horizon_days = 1;
  return p;
}

FleetEvent Fault(int machine, Cause cause, DetectClass detect, Remedy remedy) {
  FleetEvent e;
  e.kind = EventKind::kFault;
  e.node = machine;
  e.cause = cause;
  e.detect = detect;
  e.remedy = remedy;
  return e;
}

/// The cluster's events, oldest first, as "<seconds since t0> <description>".
std::vector<std::string> Events(ProductEngine& engine, SystemTime t0) {
  std::vector<std::string> out;
  store::EventQuery q;
  q.limit = 100;
  for (;;) {
    auto page = engine.store().listEvents(engine.clusterId(), q);
    EXPECT_TRUE(page.ok());
    for (const auto& e : page->items) {
      const double s = std::chrono::duration<double>(e.time - t0).count();
      out.push_back(std::to_string(s) + " " + e.description);
    }
    if (page->next_token.empty()) break;
    q.page_token = page->next_token;
  }
  return out;
}

/// The time (seconds since `t0`) of the first event later than `after` seconds whose
/// description contains `text`; -1 when none.
double FirstEvent(ProductEngine& engine, SystemTime t0, const std::string& text,
                  double after = 0) {
  for (const auto& e : Events(engine, t0)) {
    const double at = std::stod(e.substr(0, e.find(' ')));
    if (at > after && absl::StrContains(e, text)) return at;
  }
  return -1;
}

TEST(ProductEngine, DeadNodeIsMarkedReplacedAndTheJobResumes) {
  ProductEngine engine(Small(), HyperfleetStrategy(), /*spares=*/0, /*seed=*/1);
  ASSERT_TRUE(engine.bringUp().ok());
  const SystemTime t0 = engine.now();
  ASSERT_TRUE(engine.ledger().running());
  const int machine = engine.jobMachine(0);
  engine.inject(Fault(machine, Cause::kHostMaint, DetectClass::kD1Loud, Remedy::kReplace));
  EXPECT_FALSE(engine.ledger().running());  // the job stops at the fault
  engine.runFor(seconds(2));
  // The provider shows the machine stopped after dead_visible (0.1 s mean); the planner's next
  // liveness pass (every second) calls it Dead and replaces it at once.
  const double dead = FirstEvent(engine, t0, "Dead on instance");
  EXPECT_GT(dead, 0.0);
  EXPECT_LE(dead, 1.5);
  EXPECT_EQ(FirstEvent(engine, t0, "Replacing instance"), dead);
  // Slurm has the node DOWN (the planner's mark, applied by the controller's agent).
  bool down = false;
  for (const auto& [name, s] : engine.agents().slurm()) down |= s.down;
  EXPECT_TRUE(down);
  engine.runFor(seconds(118));
  // The replacement (same name and address) boots and runs its lifecycle scripts: measured
  // 5.4-6.6 s replacement idle; Slurm's node is resumed; the job runs again.
  const double running = FirstEvent(engine, t0, "is running in group workers", dead);
  EXPECT_GT(running - dead, 3.0);
  EXPECT_LT(running - dead, 10.0);
  for (const auto& [name, s] : engine.agents().slurm()) EXPECT_FALSE(s.down) << name;
  EXPECT_TRUE(engine.ledger().running());
  ASSERT_EQ(engine.ledger().interruptions().size(), 1u);
  // Downtime: detection, the mark, the replacement, Slurm's start (3.8 s) and the
  // application's restart (30 s): about 40 s.
  const double downtime_s = 60 * engine.ledger().interruptions()[0].downtime_min;
  EXPECT_GT(downtime_s, 35.0);
  EXPECT_LT(downtime_s, 50.0);
  EXPECT_NE(engine.jobMachine(0), machine);  // the job runs on a new machine
}

TEST(ProductEngine, SilentNodeIsFoundHungAfterUnresponsiveAfter) {
  ProductEngine engine(Small(), HyperfleetStrategy(), 1, 1);
  ASSERT_TRUE(engine.bringUp().ok());
  const SystemTime t0 = engine.now();
  engine.inject(Fault(engine.jobMachine(1), Cause::kNic, DetectClass::kD2Network,
                      Remedy::kReplace));
  engine.runFor(seconds(60));
  const double hung = FirstEvent(engine, t0, "Unresponsive on instance");
  EXPECT_GT(hung, 10.0);  // unresponsive_after, then the next 1 s pass
  EXPECT_LE(hung, 11.5);
  // With a spare the job restarts once Slurm has the node DOWN, without the replacement.
  EXPECT_TRUE(engine.ledger().running());
  EXPECT_LT(60 * engine.ledger().interruptions().at(0).downtime_min, hung + 40.0);
}

// A node fault seen only as the job's crash (class D3 with a replace remedy: a bad return,
// say): the strategy's assumed watchdog asks Slurm to replace the node, so the job resumes
// instead of waiting for a DOWN mark that nothing would set (a 54-day run once lost 78 % of
// its wall time to that).
TEST(ProductEngine, ANodeFaultSeenAsAJobCrashIsReplacedAndTheJobResumes) {
  ProductEngine engine(Small(), HyperfleetStrategy(), /*spares=*/1, /*seed=*/1);
  ASSERT_TRUE(engine.bringUp().ok());
  const SystemTime t0 = engine.now();
  const int machine = engine.jobMachine(2);
  engine.inject(Fault(machine, Cause::kSoftware, DetectClass::kD3JobCrash, Remedy::kReplace));
  EXPECT_FALSE(engine.ledger().running());
  engine.runFor(std::chrono::minutes(30));
  EXPECT_GT(FirstEvent(engine, t0, "Replacing instance"), 0.0);
  EXPECT_TRUE(engine.ledger().running());
  ASSERT_EQ(engine.ledger().interruptions().size(), 1u);
  EXPECT_LT(engine.ledger().interruptions()[0].downtime_min, 10.0);
}

/// A run of a small fleet with a high failure rate and every cause, as text: the cluster's
/// events with their times, then the job's figures.
std::string Trace(bool skip_passes, uint64_t seed, ProductCounters* counters = nullptr) {
  FgufParams p = FgufParams::PurePoisson();
  p.fleet_nodes = 30;
  p.job_nodes = 8;
  p.horizon_days = 0.25;
  p.rate_per_1000_node_days = 6000;  // about 21 faults in 6 hours
  p.planned_per_day = 8;
  for (CauseSpec& c : p.causes) c.share = 1.0 / static_cast<double>(p.causes.size());  // all kinds
  ProductOptions o;
  o.skip_passes = skip_passes;
  ProductEngine engine(p, HyperfleetStrategy(), 2, seed, o);
  EXPECT_TRUE(engine.bringUp().ok());
  const SystemTime t0 = engine.now();
  const RunResult r = engine.run();
  std::string out;
  for (const auto& e : Events(engine, t0)) out += e + "\n";
  out += "ettr " + std::to_string(r.ettr) + " interruptions " + std::to_string(r.interruptions) +
         " mttr " + std::to_string(r.mttr_mean_min) + "\n";
  if (counters) *counters = engine.counters();
  return out;
}

TEST(ProductEngine, SkippingPassesChangesNoDecisionNorItsTime) {
  ProductCounters every{}, skipping{};
  const std::string reference = Trace(false, 7, &every);
  const std::string skipped = Trace(true, 7, &skipping);
  EXPECT_EQ(skipped, reference);
  // It did skip, and what it ran is what changed things: far fewer passes.
  EXPECT_GT(skipping.passes_skipped, 10 * skipping.passes_run);
  EXPECT_LT(skipping.passes_run * 20, every.passes_run);
  EXPECT_GT(std::count(reference.begin(), reference.end(), '\n'), 50);  // faults happened
}

TEST(ProductEngine, SameSeedSameResult) {
  EXPECT_EQ(Trace(true, 3), Trace(true, 3));
  EXPECT_NE(Trace(true, 3), Trace(true, 4));
}

}  // namespace
}  // namespace hf::sim::product
