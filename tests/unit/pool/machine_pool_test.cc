// The machine pool's policy, rule by rule, as tables over small pools.
#include "hyperfleet/pool/machine_pool.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hf::pool {
namespace {

using S = MachineState;
using std::chrono::hours;
using std::chrono::minutes;

const SystemTime kT0 = SystemTime{} + hours(24 * 365 * 50);
constexpr const char* kType = "ml.c5.large";

Machine M(std::string id, S state, std::string type = kType) {
  Machine m;
  m.id = std::move(id);
  m.instance_type = std::move(type);
  m.state = state;
  m.since = kT0 - hours(1);
  if (state == S::kSpareReady || state == S::kSpareChecking) m.last_check = kT0 - minutes(10);
  if (state == S::kInUse) {
    m.cluster = "c1";
    m.node = "i-" + m.id;
  }
  return m;
}

Machine WithFailures(Machine m, std::vector<SystemTime> failures) {
  m.failures = std::move(failures);
  return m;
}

std::vector<std::string> Ids(const Allocation& a) {
  std::vector<std::string> ids;
  for (const Grant& g : a.grants) ids.push_back(g.machine.id + (g.from_spare ? "*" : ""));
  return ids;
}

TEST(MachinePool, StateNamesRoundTrip) {
  for (S s : {S::kFree, S::kSpareProvisioning, S::kSpareReady, S::kSpareChecking, S::kInUse,
              S::kRebooting, S::kRepairing, S::kChecking, S::kQuarantined}) {
    EXPECT_EQ(ParseMachineState(MachineStateName(s)), s) << MachineStateName(s);
  }
  EXPECT_EQ(ParseMachineState("Free"), std::nullopt);
  EXPECT_EQ(MachineStateName(S::kSpareReady), "spare-ready");
}

TEST(MachinePool, AllocateTakesReadySparesFirstThenHealthiestFree) {
  Machine fresh = M("s2", S::kSpareReady);
  fresh.last_check = kT0 - minutes(1);  // checked more recently than s1
  struct Case {
    std::string name;
    std::vector<Machine> pool;
    int nodes;
    bool all_or_nothing;
    std::vector<std::string> want;  // machine ids, "*" = from a spare
    bool short_of_capacity;
  };
  const std::vector<Case> cases = {
      {"a spare before a free machine", {M("f1", S::kFree), M("s1", S::kSpareReady)}, 1, false,
       {"s1*"}, false},
      {"the freshest spare first", {M("s1", S::kSpareReady), fresh}, 2, false, {"s2*", "s1*"},
       false},
      {"free machines by id", {M("f2", S::kFree), M("f1", S::kFree)}, 2, false, {"f1", "f2"},
       false},
      {"fewest recent failures first",
       {WithFailures(M("f1", S::kFree), {kT0 - hours(2)}), M("f2", S::kFree)}, 1, false, {"f2"},
       false},
      {"a failure older than the window does not count",
       {WithFailures(M("f1", S::kFree), {kT0 - hours(24 * 8)}), M("f2", S::kFree)}, 1, false,
       {"f1"}, false},
      {"spares then free", {M("f1", S::kFree), M("s1", S::kSpareReady)}, 2, false,
       {"s1*", "f1"}, false},
      {"never a provisioning, checking, quarantined, in-use or other-type machine",
       {M("p", S::kSpareProvisioning), M("k", S::kSpareChecking), M("q", S::kQuarantined),
        M("u", S::kInUse), M("r", S::kRepairing), M("c", S::kChecking),
        M("o", S::kFree, "ml.p5.48xlarge")},
       1, false, {}, true},
      {"partial grant when short", {M("f1", S::kFree)}, 2, false, {"f1"}, true},
      {"nothing when short and all-or-nothing", {M("f1", S::kFree)}, 2, true, {}, true},
      {"all-or-nothing with enough", {M("f1", S::kFree), M("s1", S::kSpareReady)}, 2, true,
       {"s1*", "f1"}, false},
  };
  for (const Case& c : cases) {
    LaunchRequest req{"c2", kType, {}, c.all_or_nothing};
    for (int i = 0; i < c.nodes; ++i) req.nodes.push_back("i-new" + std::to_string(i));
    Allocation a = Allocate(c.pool, req, PoolPolicy{}, kT0);
    EXPECT_EQ(Ids(a), c.want) << c.name;
    EXPECT_EQ(a.shortfall.has_value(), c.short_of_capacity) << c.name;
    for (size_t i = 0; i < a.grants.size(); ++i) {
      const Machine& m = a.grants[i].machine;
      EXPECT_EQ(m.state, S::kInUse) << c.name;
      EXPECT_EQ(m.cluster, "c2") << c.name;
      EXPECT_EQ(m.node, req.nodes[i]) << c.name;
      EXPECT_EQ(m.since, kT0) << c.name;
      EXPECT_FALSE(m.last_check.has_value()) << c.name;
    }
  }
}

TEST(MachinePool, ShortfallSaysTheNumbers) {
  std::vector<Machine> pool = {M("s1", S::kSpareReady), M("u1", S::kInUse),
                               M("u2", S::kInUse), M("q1", S::kQuarantined),
                               M("r1", S::kRepairing), M("f1", S::kFree)};
  Allocation a = Allocate(pool, {"c1", kType, {"i-a", "i-b", "i-c"}, true}, PoolPolicy{}, kT0);
  ASSERT_TRUE(a.shortfall.has_value());
  EXPECT_TRUE(a.grants.empty());
  EXPECT_EQ(a.shortfall->requested, 3);
  EXPECT_EQ(a.shortfall->spares_ready, 1);
  EXPECT_EQ(a.shortfall->free, 1);
  EXPECT_EQ(a.shortfall->message,
            "Insufficient capacity for ml.c5.large: 3 requested, 1 hot spare ready and 1 free "
            "machine (2 in use, 0 spares being prepared, 1 in reboot or repair, 1 "
            "quarantined)");
}

TEST(MachinePool, CountCapacity) {
  std::vector<Machine> pool = {M("a", S::kFree), M("b", S::kSpareReady),
                               M("c", S::kSpareProvisioning), M("d", S::kSpareChecking),
                               M("e", S::kInUse), M("f", S::kRebooting), M("g", S::kRepairing),
                               M("h", S::kChecking), M("i", S::kQuarantined),
                               M("x", S::kFree, "other")};
  Capacity c = CountCapacity(pool, kType);
  EXPECT_EQ(c.free, 1);
  EXPECT_EQ(c.spares_ready, 1);
  EXPECT_EQ(c.spares_provisioning, 2);
  EXPECT_EQ(c.in_use, 1);
  EXPECT_EQ(c.out_of_service, 3);
  EXPECT_EQ(c.quarantined, 1);
  EXPECT_EQ(c.total, 9);
}

std::vector<std::string> Steps(const std::vector<SpareStep>& steps) {
  std::vector<std::string> out;
  for (const SpareStep& s : steps) {
    const char* kind = s.kind == SpareStep::Kind::kProvision ? "provision "
                       : s.kind == SpareStep::Kind::kCheck   ? "check "
                                                             : "retire ";
    out.push_back(kind + s.machine.id + " -> " + std::string(MachineStateName(s.machine.state)));
  }
  return out;
}

TEST(MachinePool, PlanSparesRefillsChecksAndRetires) {
  Machine stale = M("s-old", S::kSpareReady);
  stale.last_check = kT0 - hours(2);
  Machine due = M("s-due", S::kSpareReady);
  due.last_check = kT0 - hours(1);  // exactly the interval: due
  struct Case {
    std::string name;
    std::vector<Machine> pool;
    int target;
    std::vector<std::string> want;
  };
  const std::vector<Case> cases = {
      {"no target, nothing", {M("f1", S::kFree)}, 0, {}},
      {"refill from free, healthiest first",
       {WithFailures(M("f1", S::kFree), {kT0 - hours(3)}), M("f2", S::kFree), M("f3", S::kFree)},
       2, {"provision f2 -> spare-provisioning", "provision f3 -> spare-provisioning"}},
      {"provisioning and checking spares count toward the target",
       {M("p1", S::kSpareProvisioning), M("k1", S::kSpareChecking), M("f1", S::kFree)}, 2, {}},
      {"as many as there are free", {M("f1", S::kFree), M("u1", S::kInUse)}, 3,
       {"provision f1 -> spare-provisioning"}},
      {"a stale spare is checked", {stale, M("s1", S::kSpareReady)}, 2,
       {"check s-old -> spare-checking"}},
      {"a check exactly one interval old is due", {due}, 1, {"check s-due -> spare-checking"}},
      {"above the target: the longest unchecked is retired, not checked",
       {stale, M("s1", S::kSpareReady)}, 1, {"retire s-old -> free"}},
      {"other types are left alone", {M("o1", S::kFree, "other")}, 1, {}},
  };
  for (const Case& c : cases) {
    PoolPolicy policy;
    if (c.target > 0) policy.spare_target[kType] = c.target;
    std::vector<SpareStep> steps = PlanSpares(c.pool, policy, kT0);
    EXPECT_EQ(Steps(steps), c.want) << c.name;
    for (const SpareStep& s : steps) EXPECT_EQ(s.machine.since, kT0) << c.name;
  }
}

TEST(MachinePool, RetiredSpareForgetsItsCheck) {
  PoolPolicy policy;
  policy.spare_target[kType] = 0;
  std::vector<SpareStep> steps = PlanSpares(std::vector<Machine>{M("s1", S::kSpareReady)},
                                            policy, kT0);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_FALSE(steps[0].machine.last_check.has_value());
}

struct ApplyCase {
  std::string name;
  Machine before;
  Report report;
  S want_state;
  bool want_node_kept;  // cluster/node still on the machine
  bool replace_node;
  bool quarantined;
};

TEST(MachinePool, ApplyTransitions) {
  Machine rebooting_in_place = M("m", S::kInUse);
  rebooting_in_place.state = S::kRebooting;
  Machine one_recent = WithFailures(M("m", S::kInUse), {kT0 - hours(24 * 6)});
  Machine one_old = WithFailures(M("m", S::kInUse), {kT0 - hours(24 * 7)});
  const std::vector<ApplyCase> cases = {
      {"in-place reboot keeps the node", M("m", S::kInUse), Report::kFaultRebootInPlace,
       S::kRebooting, true, false, false},
      {"reboot elsewhere moves the node", M("m", S::kInUse), Report::kFaultReboot, S::kRebooting,
       false, true, false},
      {"repair moves the node", M("m", S::kInUse), Report::kFaultRepair, S::kRepairing, false,
       true, false},
      {"lemon: second failure within 7 days quarantines", one_recent, Report::kFaultRepair,
       S::kQuarantined, false, true, true},
      {"lemon overrides an in-place reboot", one_recent, Report::kFaultRebootInPlace,
       S::kQuarantined, false, true, true},
      {"a failure exactly 7 days old has left the window", one_old, Report::kFaultRepair,
       S::kRepairing, false, true, false},
      {"a spare failing its check goes to repair", M("m", S::kSpareChecking),
       Report::kCheckFailed, S::kRepairing, false, false, false},
      {"a bad return (failed return check) goes to repair", M("m", S::kChecking),
       Report::kCheckFailed, S::kRepairing, false, false, false},
      {"failed spare provisioning goes to repair", M("m", S::kSpareProvisioning),
       Report::kCheckFailed, S::kRepairing, false, false, false},
      {"a spare found dead is repaired", M("m", S::kSpareReady), Report::kFaultRepair,
       S::kRepairing, false, false, false},
      {"in-place reboot done: back in use", rebooting_in_place, Report::kRebooted, S::kInUse,
       true, false, false},
      {"pipeline reboot done: return check", M("m", S::kRebooting), Report::kRebooted,
       S::kChecking, false, false, false},
      {"repair done: return check", M("m", S::kRepairing), Report::kRepaired, S::kChecking,
       false, false, false},
      {"return check passed: free", M("m", S::kChecking), Report::kCheckPassed, S::kFree, false,
       false, false},
      {"spare check passed: ready", M("m", S::kSpareChecking), Report::kCheckPassed,
       S::kSpareReady, false, false, false},
      {"provisioned: ready spare", M("m", S::kSpareProvisioning), Report::kProvisioned,
       S::kSpareReady, false, false, false},
      {"released: free", M("m", S::kInUse), Report::kReleased, S::kFree, false, false, false},
      {"released during an in-place reboot: still rebooting, without its node",
       rebooting_in_place, Report::kReleased, S::kRebooting, false, false, false},
      {"operator return: checked first", M("m", S::kQuarantined), Report::kOperatorReturn,
       S::kChecking, false, false, false},
  };
  for (const ApplyCase& c : cases) {
    StatusOr<Transition> t = Apply(c.before, c.report, PoolPolicy{}, kT0, "xid 79");
    ASSERT_TRUE(t.ok()) << c.name << ": " << t.status();
    EXPECT_EQ(t->machine.state, c.want_state) << c.name;
    // `since` moves with the state only.
    EXPECT_EQ(t->machine.since, c.want_state == c.before.state ? c.before.since : kT0) << c.name;
    EXPECT_EQ(!t->machine.node.empty(), c.want_node_kept) << c.name;
    EXPECT_EQ(t->machine.cluster.empty(), t->machine.node.empty()) << c.name;
    EXPECT_EQ(t->replace_node, c.replace_node) << c.name;
    EXPECT_EQ(t->quarantined, c.quarantined) << c.name;
  }
}

TEST(MachinePool, FaultsAreRecordedAndOldOnesDropped) {
  Machine m = WithFailures(M("m", S::kInUse), {kT0 - hours(24 * 30)});
  StatusOr<Transition> t = Apply(m, Report::kFaultRepair, PoolPolicy{}, kT0, "xid 79");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->machine.failures, std::vector<SystemTime>{kT0});
  EXPECT_EQ(t->machine.reason, "xid 79");
  // A check that passes records nothing.
  StatusOr<Transition> back = Apply(M("m", S::kChecking), Report::kCheckPassed, PoolPolicy{}, kT0);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->machine.failures.empty());
  EXPECT_TRUE(back->machine.reason.empty());
}

TEST(MachinePool, QuarantineSaysWhy) {
  Machine m = WithFailures(M("m", S::kChecking), {kT0 - hours(30)});
  StatusOr<Transition> t = Apply(m, Report::kCheckFailed, PoolPolicy{}, kT0, "bad return");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->machine.state, S::kQuarantined);
  EXPECT_EQ(t->machine.reason, "lemon: 2 failures within 168 h; last: bad return");
  EXPECT_EQ(t->machine.failures.size(), 2u);
}

TEST(MachinePool, LemonRuleIsConfigurable) {
  Machine m = WithFailures(M("m", S::kInUse), {kT0 - hours(30), kT0 - hours(20)});
  PoolPolicy three_in_a_day;
  three_in_a_day.lemon_failures = 3;
  three_in_a_day.lemon_window = hours(24);
  // Failures at -30 h (outside the day), -20 h, now: 2 within the day, not yet a lemon.
  EXPECT_EQ(Apply(m, Report::kFaultRepair, three_in_a_day, kT0)->machine.state, S::kRepairing);
  PoolPolicy two_day = three_in_a_day;
  two_day.lemon_window = hours(48);
  EXPECT_EQ(Apply(m, Report::kFaultRepair, two_day, kT0)->machine.state, S::kQuarantined);
  PoolPolicy never;
  never.lemon_failures = 0;
  EXPECT_EQ(Apply(m, Report::kFaultRepair, never, kT0)->machine.state, S::kRepairing);
}

TEST(MachinePool, WithoutReturnCheckAMachineComesBackFree) {
  PoolPolicy policy;
  policy.return_check = false;
  EXPECT_EQ(Apply(M("m", S::kRepairing), Report::kRepaired, policy, kT0)->machine.state, S::kFree);
  EXPECT_EQ(Apply(M("m", S::kRebooting), Report::kRebooted, policy, kT0)->machine.state, S::kFree);
  EXPECT_EQ(Apply(M("m", S::kQuarantined), Report::kOperatorReturn, policy, kT0)->machine.state,
            S::kFree);
}

TEST(MachinePool, ReportsThatDoNotFitTheStateAreRefused) {
  struct Case {
    S state;
    Report report;
  };
  const std::vector<Case> cases = {
      {S::kFree, Report::kRebooted},          {S::kFree, Report::kFaultRebootInPlace},
      {S::kInUse, Report::kProvisioned},      {S::kInUse, Report::kCheckPassed},
      {S::kSpareReady, Report::kCheckPassed}, {S::kRepairing, Report::kRebooted},
      {S::kQuarantined, Report::kReleased},   {S::kChecking, Report::kRepaired},
      {S::kFree, Report::kOperatorReturn},    {S::kQuarantined, Report::kFaultRepair},
  };
  for (const Case& c : cases) {
    Machine m = M("m7", c.state);
    StatusOr<Transition> t = Apply(m, c.report, PoolPolicy{}, kT0);
    ASSERT_FALSE(t.ok()) << MachineStateName(c.state);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(t.status().message().find("machine m7 is " +
                                        std::string(MachineStateName(c.state))),
              std::string::npos)
        << t.status();
  }
}

// A replacement's whole path through the pool: the spare serves the node, the faulty machine
// is repaired and checked, the pool refills, and a second fault within the week quarantines.
TEST(MachinePool, ReplacementByASpareAndRefill) {
  PoolPolicy policy;
  policy.spare_target[kType] = 1;
  std::vector<Machine> pool = {M("a", S::kInUse), M("b", S::kSpareReady), M("c", S::kFree)};
  auto put = [&](const Machine& m) {
    for (Machine& old : pool) {
      if (old.id == m.id) old = m;
    }
  };
  StatusOr<Transition> fault = Apply(pool[0], Report::kFaultRepair, policy, kT0, "xid 48");
  ASSERT_TRUE(fault.ok());
  ASSERT_TRUE(fault->replace_node);
  put(fault->machine);
  Allocation a = Allocate(pool, {"c1", kType, {"i-a2"}, false}, policy, kT0);
  ASSERT_EQ(Ids(a), std::vector<std::string>{"b*"});
  put(a.grants[0].machine);
  EXPECT_EQ(Steps(PlanSpares(pool, policy, kT0)),
            std::vector<std::string>{"provision c -> spare-provisioning"});
  const SystemTime later = kT0 + hours(24);
  put(Apply(pool[0], Report::kRepaired, policy, later)->machine);
  put(Apply(pool[0], Report::kCheckFailed, policy, later, "bad return")->machine);
  EXPECT_EQ(pool[0].state, S::kQuarantined);
}

}  // namespace
}  // namespace hf::pool
