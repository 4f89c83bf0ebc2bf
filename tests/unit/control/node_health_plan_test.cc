// Node health in the planner (docs/resiliency.md): detection of dead, unresponsive and
// faulty nodes, NodeRecovery Automatic and None, Slurm's Action:Replace / Action:Reboot
// marks, the Slurm DOWN / resume marks the planner asks for, and retried replacements.
// PlanCluster is pure: each test builds a snapshot, plans at a given time and checks.
#include <gtest/gtest.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "hyperfleet/control/cluster_plan.h"
#include "hyperfleet/model/service_model.h"
#include "plan_fixtures.h"

namespace hf::control {
namespace {

using nlohmann::json;
using std::chrono::seconds;
namespace cs = model::cluster_status;
namespace is = model::instance_status;
namespace ls = model::lifecycle_state;
using provider::InstanceState;
using Request = model::NodeRecoveryRequest;
using Action = Request::Action;

const SystemTime kT0 = FromEpochSeconds(1'800'000'000);

using Severity = model::HealthSeverity;
using HAction = model::HealthAction;

/// A health report as the agent service keeps it (agentapi::ToModelHealth).
model::HealthReport Health(Severity verdict, SystemTime checked_at,
                           std::vector<model::HealthFinding> findings = {}) {
  model::HealthReport r;
  r.verdict = verdict;
  r.checked_at = checked_at;
  r.findings = std::move(findings);
  return r;
}

using plan_test::Group;

/// An InService cluster "ctl" ×1 + "workers" ×2 of Running nodes whose agents were heard at
/// kT0, observed running since kT0 - 1 h; the Slurm controller view lists every node idle.
struct Fixture {
  ClusterSnapshot snap;
  SequentialIdSource ids{100};

  explicit Fixture(std::string node_recovery = "Automatic") {
    snap.cluster.id = "abcdefabcdef";
    snap.cluster.name = "demo";
    snap.cluster.status = cs::kInService;
    snap.cluster.groups = {Group("ctl", 1), Group("workers", 2)};
    snap.cluster.spec = {{"NodeRecovery", node_recovery}};
    snap.lifecycle_by_agent = true;
    snap.controller_group = "ctl";
    snap.slurm_nodes.emplace();
    const char* groups[] = {"ctl", "workers", "workers"};
    for (int k = 0; k < 3; ++k) {
      model::Node n;
      n.cluster_id = snap.cluster.id;
      n.instance_id = "i-00000000000000000" + std::to_string(k);
      n.logical_id = std::string(groups[k]) + "-" + std::to_string(k);
      n.group = groups[k];
      n.instance_type = "ml.c5.xlarge";
      n.status = is::kRunning;
      n.lifecycle_state = ls::kSucceeded;
      n.launch_time = kT0 - std::chrono::hours(1);
      n.private_ip = "10.1.0." + std::to_string(k + 2);
      n.hostname = "ip-10-1-0-" + std::to_string(k + 2);
      n.revision = 1;
      provider::InstanceObservation o;
      o.instance_id = n.instance_id;
      o.cluster_id = n.cluster_id;
      o.state = InstanceState::kRunning;
      o.private_ip = n.private_ip;
      o.hostname = n.hostname;
      o.boot_time = n.launch_time;
      snap.instances.push_back(o);
      snap.liveness[n.instance_id].last_heard = kT0;
      if (k > 0) snap.slurm_nodes->push_back({n.hostname, "idle", 0, "", {}});
      snap.nodes.push_back(n);
    }
  }
  model::Node& node(int k) { return snap.nodes[k]; }
  provider::InstanceObservation& obs(int k) { return snap.instances[k]; }
  SlurmNodeState& slurm(int k) { return (*snap.slurm_nodes)[k - 1]; }
  ClusterPlan plan(SystemTime at) { return PlanCluster(snap, at, ids); }
};

const model::Node* Written(const ClusterPlan& p, const std::string& instance_id) {
  for (const auto& w : p.writes.nodes) {
    if (w.node.instance_id == instance_id && !w.erase) return &w.node;
  }
  return nullptr;
}

const model::Node* Replacement(const ClusterPlan& p, const std::string& of) {
  for (const auto& w : p.writes.nodes) {
    if (w.node.marks.replacement_of == of) return &w.node;
  }
  return nullptr;
}

bool HasEvent(const ClusterPlan& p, const std::string& text) {
  return std::any_of(p.writes.events.begin(), p.writes.events.end(),
                     [&](const model::Event& e) { return e.description.find(text) != std::string::npos; });
}

/// The reason of the plan's "down" mark for `node` ("" when none).
std::string DownReason(const ClusterPlan& p, const std::string& node) {
  for (const auto& m : p.slurm_marks) {
    if (m.node == node && m.action == "down") return m.reason;
  }
  return "";
}

bool HasMark(const ClusterPlan& p, const std::string& node, const std::string& action) {
  return std::any_of(p.slurm_marks.begin(), p.slurm_marks.end(), [&](const SlurmMark& m) {
    return m.node == node && m.action == action;
  });
}

TEST(NodeHealthPlan, AHealthyClusterIsLeftAloneAndWatched) {
  Fixture f;
  auto p = f.plan(kT0 + seconds(1));
  EXPECT_TRUE(p.writes.nodes.empty());
  EXPECT_TRUE(p.kills.empty());
  EXPECT_TRUE(p.slurm_marks.empty());
  EXPECT_TRUE(p.watch_liveness);
  EXPECT_TRUE(p.settled);
}

TEST(NodeHealthPlan, ADeadWorkerIsReplacedAtOnceWithTheSameNameAndAddress) {
  Fixture f;
  f.obs(1).state = InstanceState::kFailed;
  f.obs(1).message = "the node stopped";
  auto p = f.plan(kT0 + seconds(1));
  EXPECT_EQ(p.kills, std::vector<std::string>{f.node(1).instance_id});
  EXPECT_TRUE(p.terminations.empty());
  const model::Node* old = Written(p, f.node(1).instance_id);
  ASSERT_NE(old, nullptr);
  EXPECT_EQ(old->status, is::kShuttingDown);
  const model::Node* r = Replacement(p, f.node(1).instance_id);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->status, is::kPending);
  EXPECT_EQ(r->logical_id, f.node(1).logical_id);
  EXPECT_EQ(r->hostname, f.node(1).hostname);
  EXPECT_NE(r->message.find("the node stopped"), std::string::npos);
  EXPECT_TRUE(HasEvent(p, "Dead on instance " + f.node(1).instance_id));
  // Slurm learns at once, before Slurm's own timeout.
  EXPECT_TRUE(HasMark(p, f.node(1).hostname, "down"));
}

TEST(NodeHealthPlan, ASilentAgentOnARunningInstanceIsUnresponsiveAfterTheThreshold) {
  Fixture f;
  f.snap.liveness[f.node(2).instance_id].last_heard = kT0 - seconds(9);
  EXPECT_TRUE(f.plan(kT0).kills.empty());  // 9 s: not yet
  f.snap.liveness[f.node(2).instance_id].last_heard = kT0 - seconds(11);
  auto p = f.plan(kT0);
  EXPECT_EQ(p.kills, std::vector<std::string>{f.node(2).instance_id});
  EXPECT_TRUE(HasEvent(p, "No heartbeat from the node agent for 11 s"));
}

TEST(NodeHealthPlan, MostNodesSilentAtOnceIsNotBlamedOnTheNodes) {
  Fixture f;
  for (int k = 0; k < 3; ++k) f.snap.liveness[f.node(k).instance_id].last_heard = kT0 - seconds(30);
  auto p = f.plan(kT0);
  EXPECT_TRUE(p.kills.empty());
  EXPECT_TRUE(p.hard_reboots.empty());
  EXPECT_TRUE(p.writes.nodes.empty());
  EXPECT_NE(p.notice.find("3 of 3 running nodes"), std::string::npos) << p.notice;
  // A dead node is still replaced (the provider saw it stop).
  f.obs(1).state = InstanceState::kFailed;
  EXPECT_EQ(f.plan(kT0).kills, std::vector<std::string>{f.node(1).instance_id});
}

TEST(NodeHealthPlan, SilenceBeforeTheControlPlaneListenedDoesNotCount) {
  Fixture f;
  f.snap.liveness.clear();  // a restarted control plane has heard nobody yet
  f.snap.liveness_policy.listening_since = kT0;
  EXPECT_TRUE(f.plan(kT0 + seconds(9)).writes.nodes.empty());
  // Since then two agents spoke; the third stays silent.
  f.snap.liveness[f.node(0).instance_id].last_heard = kT0 + seconds(10);
  f.snap.liveness[f.node(2).instance_id].last_heard = kT0 + seconds(10);
  EXPECT_EQ(f.plan(kT0 + seconds(11)).kills, std::vector<std::string>{f.node(1).instance_id});
}

TEST(NodeHealthPlan, AHungControllerIsPowerCycledNotReplaced) {
  Fixture f;
  f.snap.liveness[f.node(0).instance_id].last_heard = kT0 - seconds(30);
  auto p = f.plan(kT0);
  EXPECT_TRUE(p.kills.empty());
  EXPECT_EQ(p.hard_reboots, std::vector<std::string>{f.node(0).instance_id});
  const model::Node* n = Written(p, f.node(0).instance_id);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->status, is::kPending);
  EXPECT_NE(n->message.find("Rebooting"), std::string::npos);
  EXPECT_EQ(n->recovered_at, kT0);
  EXPECT_TRUE(HasEvent(p, "Controller nodes are rebooted, not replaced"));
}

TEST(NodeHealthPlan, HealthVerdictsChooseReplaceOrReboot) {
  Fixture f;
  f.snap.liveness[f.node(1).instance_id].health = Health(
      Severity::kHardFault, kT0, {{"gpu:0", Severity::kHardFault, HAction::kReplace, "Xid 79"}});
  f.snap.liveness[f.node(2).instance_id].health =
      Health(Severity::kSoftFault, kT0,
             {{"slurmd", Severity::kSoftFault, HAction::kReboot, "restarts fail"}});
  auto p = f.plan(kT0 + seconds(1));
  // A hardware fault: replaced, shut down cleanly (the system still answers).
  EXPECT_EQ(p.terminations, std::vector<std::string>{f.node(1).instance_id});
  ASSERT_NE(Replacement(p, f.node(1).instance_id), nullptr);
  EXPECT_TRUE(HasEvent(p, "gpu:0: Xid 79"));
  // A software fault: rebooted softly.
  EXPECT_EQ(p.reboots, std::vector<std::string>{f.node(2).instance_id});
}

TEST(NodeHealthPlan, AHealthReportFromBeforeTheLastRecoveryIsIgnored) {
  Fixture f;
  f.node(2).recovered_at = kT0;
  f.snap.liveness[f.node(2).instance_id].health =
      Health(Severity::kSoftFault, kT0 - seconds(5));
  auto p = f.plan(kT0 + seconds(1));
  EXPECT_TRUE(p.reboots.empty());
  EXPECT_TRUE(p.writes.nodes.empty());
}

TEST(NodeHealthPlan, OkWarningAndAnUnknownVerdictAskForNothing) {
  Fixture f;
  // A verdict and an action this control plane does not know (a newer agent), as
  // agentapi::ToModelHealth keeps them.
  f.snap.liveness[f.node(0).instance_id].health = Health(
      Severity::kUnknown, kT0, {{"gpu:0", Severity::kUnknown, HAction::kUnknown, "odd"}});
  f.snap.liveness[f.node(1).instance_id].health =
      Health(Severity::kWarning, kT0, {{"disk:/", Severity::kWarning, HAction::kNone, "90 %"}});
  f.snap.liveness[f.node(2).instance_id].health = Health(Severity::kOk, kT0);
  auto p = f.plan(kT0 + seconds(1));
  EXPECT_TRUE(p.writes.nodes.empty());
  EXPECT_TRUE(p.reboots.empty());
  EXPECT_TRUE(p.terminations.empty());
}

TEST(NodeHealthPlan, NodeRecoveryNoneReportsOnceAndRecoversNothing) {
  Fixture f("None");
  f.obs(1).state = InstanceState::kFailed;
  f.obs(1).message = "the node stopped";
  f.snap.liveness[f.node(2).instance_id].health = Health(
      Severity::kSoftFault, kT0, {{"slurmd", Severity::kSoftFault, HAction::kReboot, "down"}});
  auto p = f.plan(kT0 + seconds(1));
  EXPECT_TRUE(p.kills.empty());
  EXPECT_TRUE(p.reboots.empty());
  EXPECT_EQ(Replacement(p, f.node(1).instance_id), nullptr);
  const model::Node* dead = Written(p, f.node(1).instance_id);
  const model::Node* soft = Written(p, f.node(2).instance_id);
  ASSERT_NE(dead, nullptr);
  ASSERT_NE(soft, nullptr);
  EXPECT_EQ(dead->status, is::kFailure);
  EXPECT_EQ(soft->status, is::kRunning);
  EXPECT_NE(soft->message.find("slurmd: down"), std::string::npos);
  EXPECT_TRUE(HasEvent(p, "NodeRecovery is None"));
  EXPECT_TRUE(HasMark(p, f.node(1).hostname, "down"));
  EXPECT_TRUE(HasMark(p, f.node(2).hostname, "down"));
  // The next pass, from the written records: no second event, the marks stay.
  f.node(1) = *dead;
  f.node(2) = *soft;
  auto again = f.plan(kT0 + seconds(2));
  EXPECT_TRUE(again.writes.events.empty());
  EXPECT_TRUE(HasMark(again, f.node(1).hostname, "down"));
  // The soft fault clears: healthy again, and Slurm gets the node back.
  f.snap.liveness[f.node(2).instance_id].health->verdict = Severity::kOk;
  f.slurm(2) = {f.node(2).hostname, "down", 0, "Hyperfleet: Health check: slurmd: down", kT0};
  auto healed = f.plan(kT0 + seconds(3));
  const model::Node* back = Written(healed, f.node(2).instance_id);
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back->status, is::kRunning);
  EXPECT_TRUE(back->message.empty());
  EXPECT_TRUE(HasMark(healed, f.node(2).hostname, "resume"));
}

TEST(NodeHealthPlan, SlurmActionMarksActOnFailAndDownButNotWhileFailing) {
  Fixture f;
  f.slurm(1) = {f.node(1).hostname, "failing", 0, "Action:Replace", kT0};
  EXPECT_TRUE(f.plan(kT0 + seconds(1)).writes.nodes.empty());  // jobs still run
  // A partly busy node may read "fail" while jobs still run there.
  f.slurm(1).state = "fail";
  f.slurm(1).alloc_cpus = 1;
  EXPECT_TRUE(f.plan(kT0 + seconds(2)).writes.nodes.empty());
  f.slurm(1).alloc_cpus = 0;
  auto p = f.plan(kT0 + seconds(2));
  ASSERT_NE(Replacement(p, f.node(1).instance_id), nullptr);
  EXPECT_TRUE(p.kills.empty());  // a requested replacement shuts down cleanly
  EXPECT_EQ(p.terminations, std::vector<std::string>{f.node(1).instance_id});
  // Action:Reboot with state=down reboots at once.
  f.slurm(2) = {f.node(2).hostname, "down", 0, "Action:Reboot", kT0};
  auto r = f.plan(kT0 + seconds(3));
  EXPECT_EQ(r.reboots, std::vector<std::string>{f.node(2).instance_id});
  // Reasons are exact and case-sensitive.
  Fixture g;
  g.slurm(1) = {g.node(1).hostname, "down", 0, "action:replace", kT0};
  g.slurm(2) = {g.node(2).hostname, "down", 0, "Action:Replace please", kT0};
  auto none = g.plan(kT0 + seconds(1));
  EXPECT_EQ(Replacement(none, g.node(1).instance_id), nullptr);
  EXPECT_EQ(Replacement(none, g.node(2).instance_id), nullptr);
}

TEST(NodeHealthPlan, AnActionMarkOlderThanTheInstanceIsLiftedNotActedOn) {
  Fixture f;
  // The replacement runs; Slurm still shows the user's mark from before it was launched.
  f.node(1).launch_time = kT0;
  f.slurm(1) = {f.node(1).hostname, "fail", 0, "Action:Replace", kT0 - seconds(5)};
  auto p = f.plan(kT0 + seconds(10));
  EXPECT_TRUE(p.writes.nodes.empty());
  EXPECT_TRUE(HasMark(p, f.node(1).hostname, "resume"));
}

TEST(NodeHealthPlan, AReplacementBootingKeepsTheNodeDownThenResumesIt) {
  Fixture f;
  f.obs(1).state = InstanceState::kFailed;
  auto p = f.plan(kT0 + seconds(1));
  const model::Node r0 = *Replacement(p, f.node(1).instance_id);
  const std::string reason = DownReason(p, r0.hostname);
  ASSERT_TRUE(absl::StartsWith(reason, "Hyperfleet: ")) << reason;
  // Next pass: the predecessor is gone; the replacement is pending without an agent.
  f.snap.nodes[1] = r0;
  f.snap.instances.erase(f.snap.instances.begin() + 1);
  f.slurm(1).state = "down";
  f.slurm(1).reason = reason;
  auto booting = f.plan(kT0 + seconds(2));
  EXPECT_FALSE(HasMark(booting, r0.hostname, "resume"));
  // Its agent registered (lifecycle scripts started): Slurm must take the node back now, or
  // the scripts waiting for the node to be idle would wait for ever.
  f.snap.nodes[1].lifecycle_state = ls::kStarted;
  auto started = f.plan(kT0 + seconds(3));
  EXPECT_TRUE(HasMark(started, r0.hostname, "resume"));
}

TEST(NodeHealthPlan, ARecoveryThatOutrunsTheDownMarkStillTakesTheSlurmNodeDown) {
  Fixture f;
  f.obs(1).state = InstanceState::kFailed;
  auto p = f.plan(kT0 + seconds(1));
  model::Node r = *Replacement(p, f.node(1).instance_id);
  const std::string reason = DownReason(p, r.hostname);
  // The replacement's agent already runs, but Slurm never saw the node down: its job would
  // wait for the dead node's tasks for ever.
  f.snap.nodes[1] = r;
  f.snap.nodes[1].lifecycle_state = ls::kStarted;
  f.snap.instances.erase(f.snap.instances.begin() + 1);
  f.slurm(1).state = "mixed";
  auto q = f.plan(kT0 + seconds(2));
  EXPECT_TRUE(HasMark(q, r.hostname, "down"));
  EXPECT_FALSE(HasMark(q, r.hostname, "resume"));
  // Once Slurm shows it down, the node is resumed.
  f.slurm(1) = {r.hostname, "down", 0, reason, kT0 + seconds(2)};
  auto after = f.plan(kT0 + seconds(3));
  EXPECT_TRUE(HasMark(after, r.hostname, "resume"));
  const model::Node* written = Written(after, r.instance_id);
  ASSERT_NE(written, nullptr);
  EXPECT_FALSE(written->marks.slurm_down_pending);
}

TEST(NodeHealthPlan, OnlyMarksThePlannerSetAreLifted) {
  Fixture f;
  // Someone else (a test, an operator) drains a healthy node with a look-alike reason.
  f.slurm(1) = {f.node(1).hostname, "fail", 0, "Hyperfleet: e2e test fault", kT0};
  f.slurm(2) = {f.node(2).hostname, "drained", 0, "maintenance", kT0};
  auto p = f.plan(kT0 + seconds(1));
  EXPECT_TRUE(p.slurm_marks.empty());
  EXPECT_TRUE(p.writes.nodes.empty());
}

TEST(NodeHealthPlan, AReplaceOfTheControllerIsARebootInstead) {
  Fixture f;
  f.node(0).recovery = Request{Action::kReplace, "BatchReplaceClusterNodes", kT0};
  auto p = f.plan(kT0 + seconds(1));
  EXPECT_EQ(Replacement(p, f.node(0).instance_id), nullptr);
  EXPECT_EQ(p.reboots, std::vector<std::string>{f.node(0).instance_id});
  EXPECT_TRUE(HasEvent(p, "rebooted instead of replaced"));
}

// BatchReplaceClusterNodes / BatchRebootClusterNodes on a Failure node (a dead node under
// NodeRecovery None) record a hard recovery: the old instance is killed or power-cycled, since
// it cannot be asked to shut down or reboot.
TEST(NodeHealthPlan, ABatchRecoveryOfAFailedNodeKillsOrPowerCyclesIt) {
  Fixture f("None");
  f.obs(1).state = InstanceState::kFailed;
  f.obs(1).message = "the node stopped";
  f.node(1).status = is::kPending;  // as the API leaves it
  f.node(1).recovery =
      Request{Action::kReplace, "requested by BatchReplaceClusterNodes", kT0, /*hard=*/true};
  f.obs(2).state = InstanceState::kFailed;
  f.obs(2).message = "the node stopped";
  f.node(2).status = is::kPending;
  f.node(2).recovery =
      Request{Action::kReboot, "requested by BatchRebootClusterNodes", kT0, /*hard=*/true};
  auto p = f.plan(kT0 + seconds(1));
  EXPECT_EQ(p.kills, std::vector<std::string>{f.node(1).instance_id});
  ASSERT_NE(Replacement(p, f.node(1).instance_id), nullptr);
  EXPECT_EQ(p.hard_reboots, std::vector<std::string>{f.node(2).instance_id});
  EXPECT_TRUE(p.reboots.empty());
}

TEST(NodeHealthPlan, ARebootWithinTheSameSecondIsSeenByItsNewBootTime) {
  Fixture f;
  f.node(2).recovery = Request{Action::kReboot, "", kT0};
  auto p = f.plan(kT0);
  const model::Node* started = Written(p, f.node(2).instance_id);
  ASSERT_NE(started, nullptr);
  f.node(2) = *started;
  // Boot times come from the kernel's whole-second boot time: the new boot may read as
  // earlier than the request, but it differs from the boot before.
  f.obs(2).boot_time = kT0 - std::chrono::milliseconds(300);
  auto q = f.plan(kT0 + seconds(2));
  const model::Node* done = Written(q, f.node(2).instance_id);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->status, is::kRunning);
  EXPECT_FALSE(done->recovery);
  EXPECT_TRUE(q.hard_reboots.empty());
}

TEST(NodeHealthPlan, NodeRecoveryNoneAHungNodeThatWakesUpIsRunningAgain) {
  Fixture f("None");
  f.snap.liveness[f.node(2).instance_id].last_heard = kT0 - seconds(12);
  auto p = f.plan(kT0);
  const model::Node* hung = Written(p, f.node(2).instance_id);
  ASSERT_NE(hung, nullptr);
  EXPECT_EQ(hung->status, is::kFailure);
  f.node(2) = *hung;
  f.snap.liveness[f.node(2).instance_id].last_heard = kT0 + seconds(1);
  auto q = f.plan(kT0 + seconds(2));
  const model::Node* back = Written(q, f.node(2).instance_id);
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back->status, is::kRunning);
  EXPECT_FALSE(back->fault);
}

TEST(NodeHealthPlan, AFailedReplacementIsRetriedWithBackoff) {
  Fixture f;
  f.node(1).status = is::kFailure;
  f.node(1).message = "on_create.sh exited with 1";
  f.node(1).marks.replacement_of = "i-0fffffffffffffff0";
  auto p = f.plan(kT0);
  const model::Node* n = Written(p, f.node(1).instance_id);
  ASSERT_NE(n, nullptr);
  ASSERT_TRUE(n->fault);
  EXPECT_EQ(n->fault->kind, model::NodeFault::Kind::kReplacementFailed);
  EXPECT_TRUE(HasEvent(p, "replaced again in 10 s"));
  f.node(1) = *n;
  EXPECT_EQ(Replacement(f.plan(kT0 + seconds(5)), f.node(1).instance_id), nullptr);
  auto retry = f.plan(kT0 + seconds(11));
  const model::Node* r = Replacement(retry, f.node(1).instance_id);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->marks.replace_attempt, 2);
  // The second failure waits twice as long.
  model::Node second = *r;
  second.status = is::kFailure;
  second.message = "failed again";
  f.snap.nodes.push_back(second);
  auto q = f.plan(kT0 + seconds(20));
  EXPECT_TRUE(HasEvent(q, "replaced again in 20 s"));
}

TEST(NodeHealthPlan, NothingIsDetectedWhileTheClusterIsCreating) {
  Fixture f;
  f.snap.cluster.status = cs::kCreating;
  f.snap.liveness[f.node(1).instance_id].last_heard = kT0 - seconds(60);
  auto p = f.plan(kT0);
  EXPECT_TRUE(p.kills.empty());
  // A node that stops during creation fails it, as before.
  f.obs(2).state = InstanceState::kFailed;
  f.obs(2).message = "boom";
  auto q = f.plan(kT0);
  const model::Node* n = Written(q, f.node(2).instance_id);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->status, is::kFailure);
}

/// The members of `metadata` (an event's EventMetadata) that the service model does not
/// define: keys outside the EventMetadata union, or outside the member's shape.
std::vector<std::string> UnmodeledMembers(const json& metadata) {
  const auto model = model::ServiceModel::Embedded();
  const json& kinds = (*model->shape("EventMetadata"))["members"];
  std::vector<std::string> out;
  for (auto it = metadata.begin(); it != metadata.end(); ++it) {
    if (!kinds.contains(it.key())) {
      out.push_back(it.key());
      continue;
    }
    const json& members = (*model->shape(kinds[it.key()]["shape"].get<std::string>()))["members"];
    for (auto m = it->begin(); m != it->end(); ++m) {
      if (!members.contains(m.key())) out.push_back(it.key() + "." + m.key());
    }
  }
  return out;
}

// Event metadata is what DescribeClusterEvent returns: only what the model defines is
// written (the handler would prune the rest, which would then be stored for nothing).
TEST(NodeHealthPlan, RecoveryEventsCarryOnlyModeledMetadata) {
  Fixture dead;  // a health verdict acted on
  dead.obs(1).state = InstanceState::kFailed;
  dead.obs(1).message = "the node stopped";
  Fixture asked;  // recoveries asked through the API
  asked.node(1).recovery = Request{Action::kReplace, "requested by BatchReplaceClusterNodes", kT0};
  asked.node(2).recovery = Request{Action::kReboot, "requested by BatchRebootClusterNodes", kT0};
  std::vector<std::string> described;
  for (Fixture* f : {&dead, &asked}) {
    auto p = f->plan(kT0 + seconds(1));
    for (const auto& e : p.writes.events) {
      if (e.metadata.is_null()) continue;
      described.push_back(e.description);
      EXPECT_EQ(UnmodeledMembers(e.metadata), std::vector<std::string>{})
          << e.description << ": " << e.metadata.dump();
      EXPECT_EQ(e.metadata["Instance"]["NodeLogicalId"], Written(p, e.instance_id)->logical_id);
    }
  }
  auto seen = [&](const std::string& text) {
    return std::any_of(described.begin(), described.end(),
                       [&](const std::string& d) { return absl::StrContains(d, text); });
  };
  EXPECT_TRUE(seen("Replacing it.")) << absl::StrJoin(described, "\n");
  EXPECT_TRUE(seen("Replacing instance " + asked.node(1).instance_id));
  EXPECT_TRUE(seen("Rebooting instance " + asked.node(2).instance_id));
}

}  // namespace
}  // namespace hf::control
