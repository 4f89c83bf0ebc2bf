// NextDecisionTime: every time comparison of the planner yields its instant; a heartbeating
// node yields none.
#include "hyperfleet/sim/product/pass_skipping.h"

#include <gtest/gtest.h>

namespace hf::sim::product {
namespace {

using std::chrono::seconds;
const SystemTime kT0 = SystemTime(seconds(1767225600));

control::ClusterSnapshot OneNode(SystemTime launched) {
  control::ClusterSnapshot s;
  s.lifecycle_by_agent = true;
  model::Node n;
  n.instance_id = "i-1";
  n.status = model::InstanceStatus::kRunning;
  n.launch_time = launched;
  n.lifecycle_state = model::lifecycle_state::kSucceeded;
  s.nodes.push_back(n);
  provider::InstanceObservation o;
  o.instance_id = "i-1";
  o.state = provider::InstanceState::kRunning;
  o.boot_time = launched + seconds(2);
  s.instances.push_back(o);
  return s;
}

TEST(NextDecisionTime, HeartbeatingNodeHasNone) {
  control::ClusterSnapshot s = OneNode(kT0);
  const SystemTime now = kT0 + seconds(100);
  s.liveness["i-1"] = model::NodeLiveness{now, std::nullopt};
  EXPECT_EQ(NextDecisionTime(s, now), std::nullopt);
}

TEST(NextDecisionTime, SilentNodeIsHungAfterUnresponsiveAfter) {
  control::ClusterSnapshot s = OneNode(kT0);
  const SystemTime now = kT0 + seconds(100);
  s.liveness["i-1"] = model::NodeLiveness{kT0 + seconds(95), std::nullopt};
  EXPECT_EQ(NextDecisionTime(s, now), kT0 + seconds(105));
  // No heartbeat at all: counted from the boot (LastHeard).
  s.liveness.clear();
  EXPECT_EQ(NextDecisionTime(s, kT0 + seconds(5)), kT0 + seconds(12));
  // Past thresholds are not instants to come.
  EXPECT_EQ(NextDecisionTime(s, kT0 + seconds(13)), std::nullopt);
}

TEST(NextDecisionTime, AgentStartRebootAndRetryTimers) {
  control::ClusterSnapshot s = OneNode(kT0);
  // Asked at `now` with the node heartbeating, so that silence adds no instant.
  auto at = [&](int sec) {
    const SystemTime now = kT0 + seconds(sec);
    s.liveness["i-1"] = model::NodeLiveness{now, std::nullopt};
    return NextDecisionTime(s, now);
  };
  s.nodes[0].lifecycle_state.clear();
  EXPECT_EQ(at(100), kT0 + seconds(302));  // agent_start_timeout, 5 min after the boot
  s.nodes[0].lifecycle_state = model::lifecycle_state::kStarted;
  EXPECT_EQ(at(1000), std::nullopt);
  s.nodes[0].recovery_progress.started_at = kT0 + seconds(990);
  EXPECT_EQ(at(1000), kT0 + seconds(1020));  // the lost reboot becomes a power cycle
  s.nodes[0].recovery_progress.asked_at = kT0 + seconds(1020);
  EXPECT_EQ(at(1021), kT0 + seconds(1050));
  EXPECT_EQ(at(1051), kT0 + seconds(990 + 600));  // reboot_timeout
  s.nodes[0].recovery_progress = {};
  s.nodes[0].fault = model::NodeFault{model::NodeFault::Kind::kReplacementFailed, "x",
                                      kT0 + seconds(990), kT0 + seconds(1010)};
  EXPECT_EQ(at(1000), kT0 + seconds(1010));  // the failed replacement's retry
}

TEST(FirstPassAtOrAfter, TheControllersLattice) {
  const auto ms = [](int n) { return std::chrono::milliseconds(n); };
  EXPECT_EQ(FirstPassAtOrAfter(kT0, seconds(1), kT0), kT0 + seconds(1));
  EXPECT_EQ(FirstPassAtOrAfter(kT0, seconds(1), kT0 + ms(1)), kT0 + seconds(1));
  EXPECT_EQ(FirstPassAtOrAfter(kT0, seconds(1), kT0 + seconds(1)), kT0 + seconds(1));
  EXPECT_EQ(FirstPassAtOrAfter(kT0, seconds(1), kT0 + ms(1001)), kT0 + seconds(2));
  EXPECT_EQ(FirstPassAtOrAfter(kT0, ms(100), kT0 + ms(250)), kT0 + ms(300));
}

}  // namespace
}  // namespace hf::sim::product
