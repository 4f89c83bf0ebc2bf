// The product engine's machines follow hf_pool's policy: which machine a launch gets, what a
// shortfall does, the lemon rule and the operator's return (PolicyMachinePool, SimProvider).
#include "hyperfleet/sim/product/policy_pool.h"

#include <gtest/gtest.h>

#include "hyperfleet/sim/product/sim_provider.h"

namespace hf::sim::product {
namespace {

const SystemTime kT0 = SystemTime(std::chrono::seconds(1767225600));
constexpr const char* kGpu = "ml.p5.48xlarge";
constexpr const char* kCpu = "ml.m5.12xlarge";

struct World {
  explicit World(pool::PoolPolicy policy = {}) : pool(clock, std::move(policy)) {
    SimProvider::Hooks h;
    h.exhausted = [this] { ++exhaustions; };
    provider = std::make_unique<SimProvider>(clock, events, pool, latencies, SimRng(1), h);
  }
  /// Launches instance `id` of `type` and returns the machine it got (-1: it waits).
  int launch(const std::string& id, const std::string& type) {
    provider::InstanceSpec s;
    s.instance_id = id;
    s.cluster_id = "c";
    s.instance_type = type;
    EXPECT_TRUE(provider->launch(s).ok());
    return provider->find(id)->machine;
  }
  SimClock clock{kT0};
  EventQueue events;
  ProductLatencies latencies;
  PolicyMachinePool pool;
  std::unique_ptr<SimProvider> provider;
  int exhaustions = 0;
};

TEST(PolicyMachinePool, LaunchGetsTheHealthiestFreeMachineOfItsType) {
  World w;
  w.pool.add(0, 2, kGpu);
  w.pool.add(2, 1, kCpu);
  EXPECT_EQ(w.launch("i-a", kGpu), 0);
  EXPECT_EQ(w.launch("i-b", kGpu), 1);
  // Machine 1 fails under i-b and comes back from repair (a failure within the lemon
  // window); then machine 0 is released clean. First in, first out would hand out 1 next.
  ASSERT_EQ(w.pool.fault(1, "gpu"), PolicyMachinePool::Fault::kRepair);
  w.pool.release(1);
  w.pool.release(0);
  EXPECT_EQ(w.pool.machine(1).state, pool::MachineState::kFree);
  EXPECT_EQ(w.launch("i-c", kGpu), 0);  // the healthiest free machine
  EXPECT_EQ(w.pool.machine(0).node, "i-c");
  EXPECT_EQ(w.launch("i-cpu", kCpu), 2);  // its type's machine, though a GPU machine is free
  EXPECT_EQ(w.exhaustions, 0);
}

TEST(PolicyMachinePool, AShortfallLeavesTheLaunchWaitingUntilAMachineReturns) {
  World w;
  w.pool.add(0, 1, kGpu);
  EXPECT_EQ(w.launch("i-a", kGpu), 0);
  EXPECT_EQ(w.launch("i-b", kGpu), -1);  // no spare, no free machine: it waits
  EXPECT_EQ(w.exhaustions, 1);
  EXPECT_EQ(w.pool.free_count(kGpu), 0u);
  w.pool.fault(0, "host");  // i-a's machine fails under it: out for repair
  EXPECT_EQ(w.provider->find("i-b")->machine, -1);
  w.provider->machineFree(0);  // repaired, through the return check: i-b takes it
  EXPECT_EQ(w.provider->find("i-b")->machine, 0);
  EXPECT_EQ(w.pool.machine(0).state, pool::MachineState::kInUse);
}

TEST(PolicyMachinePool, ALemonIsQuarantinedUntilTheOperatorReturnsIt) {
  pool::PoolPolicy policy;
  policy.lemon_failures = 2;
  World w(policy);
  w.pool.add(0, 1, kGpu);
  ASSERT_TRUE(w.pool.idle(0));
  EXPECT_EQ(w.pool.fault(0, "gpu"), PolicyMachinePool::Fault::kRepair);
  w.pool.release(0);
  EXPECT_EQ(w.pool.fault(0, "gpu"), PolicyMachinePool::Fault::kQuarantine);
  EXPECT_FALSE(w.pool.idle(0));
  EXPECT_EQ(w.launch("i-a", kGpu), -1);  // a quarantined machine is never granted
  w.provider->machineFree(0);            // the operator's return, after its repair
  EXPECT_EQ(w.provider->find("i-a")->machine, 0);
  // In use, it fails a third time within the window (a reboot's fault): quarantined again,
  // and back free, with no node, after the operator's return.
  EXPECT_EQ(w.pool.fault(0, "gpu", /*reboot=*/true), PolicyMachinePool::Fault::kQuarantine);
  w.pool.release(0);
  EXPECT_EQ(w.pool.machine(0).state, pool::MachineState::kFree);
  EXPECT_EQ(w.pool.machine(0).node, "");
  EXPECT_EQ(w.pool.free_count(kGpu), 1u);
}

}  // namespace
}  // namespace hf::sim::product
