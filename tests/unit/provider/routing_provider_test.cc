// `--provider local,ssh`: RouteFor's rule (table) and the RoutingProvider's routing,
// persistence across a re-create, list merge and unknown ids, over two recording fakes.
#include "hyperfleet/provider/routing_provider.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <set>

namespace hf::provider {
namespace {

namespace fs = std::filesystem;

/// A provider that records every call ("launch i-1") and keeps launched ids until terminated.
class RecordingProvider final : public Provider {
 public:
  explicit RecordingProvider(std::vector<std::string>* calls) : calls_(calls) {}
  std::string_view name() const override { return "recording"; }
  Status launch(const InstanceSpec& spec) override {
    calls_->push_back("launch " + spec.instance_id);
    if (!fail_launch.empty()) return absl::ResourceExhaustedError(fail_launch);
    ids[spec.instance_id] = spec.cluster_id;
    return absl::OkStatus();
  }
  Status terminate(std::string_view id) override { return record("terminate", id, false); }
  Status terminateNow(std::string_view id) override {
    return record("terminateNow", id, false);
  }
  Status reboot(std::string_view id) override { return record("reboot", id, true); }
  Status powerCycle(std::string_view id) override { return record("powerCycle", id, true); }
  StatusOr<int> nodeInitPid(std::string_view id) override {
    calls_->push_back("nodeInitPid " + std::string(id));
    if (!ids.contains(std::string(id))) return absl::NotFoundError("no such node");
    return 42;
  }
  Status setPodRoutes(std::string_view cluster, const std::vector<PodRoute>& routes) override {
    calls_->push_back("setPodRoutes " + std::string(cluster) + " " +
                      std::to_string(routes.size()));
    return absl::OkStatus();
  }
  StatusOr<std::vector<InstanceObservation>> list(std::string_view cluster) override {
    std::vector<InstanceObservation> out;
    for (const auto& [id, c] : ids) {
      if (c != cluster) continue;
      InstanceObservation o;
      o.instance_id = id;
      o.cluster_id = c;
      out.push_back(std::move(o));
    }
    return out;
  }

  std::map<std::string, std::string> ids;  // instance id -> cluster
  std::string fail_launch;                 // non-empty: launch fails with it

 private:
  Status record(const char* what, std::string_view id, bool not_found_when_unknown) {
    calls_->push_back(std::string(what) + " " + std::string(id));
    const bool known = ids.contains(std::string(id));
    if (std::string_view(what).starts_with("terminate")) ids.erase(std::string(id));
    if (!known && not_found_when_unknown) return absl::NotFoundError("no such instance");
    return absl::OkStatus();
  }
  std::vector<std::string>* calls_;
};

class MemoryInventory final : public MachineInventory {
 public:
  StatusOr<std::vector<PoolMachine>> machines() override { return list; }
  Status update(std::span<const PoolMachine>) override { return absl::OkStatus(); }
  StatusOr<std::map<std::string, int, std::less<>>> spareTargets() override {
    return std::map<std::string, int, std::less<>>{};
  }
  std::vector<PoolMachine> list;
};

PoolMachine MachineOf(std::string type, pool::MachineState state, bool drained = false) {
  PoolMachine m;
  m.machine.id = "m-000000000001";
  m.machine.instance_type = std::move(type);
  m.machine.state = state;
  m.drained = drained;
  return m;
}

TEST(RouteForTest, SshWhenAnyMachineOfTheTypeIsRegisteredWhateverItsState) {
  using S = pool::MachineState;
  struct Case {
    const char* name;
    std::vector<PoolMachine> machines;
    Route want;
  };
  const std::vector<Case> cases = {
      {"no machines", {}, Route::kLocal},
      {"free machine of the type", {MachineOf("ml.c5.xlarge", S::kFree)}, Route::kSsh},
      {"busy machine: waits, no fallback", {MachineOf("ml.c5.xlarge", S::kInUse)}, Route::kSsh},
      {"quarantined", {MachineOf("ml.c5.xlarge", S::kQuarantined)}, Route::kSsh},
      {"drained", {MachineOf("ml.c5.xlarge", S::kFree, true)}, Route::kSsh},
      {"only another type", {MachineOf("ml.p5.48xlarge", S::kFree)}, Route::kLocal},
      {"among others",
       {MachineOf("ml.p5.48xlarge", S::kFree), MachineOf("ml.c5.xlarge", S::kInUse)},
       Route::kSsh},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(RouteFor("ml.c5.xlarge", c.machines), c.want) << c.name;
  }
}

class RoutingProviderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "hf-routing-test-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    state_file_ = dir_ + "/routes.json";
    inventory_.list = {MachineOf("ml.p5.48xlarge", pool::MachineState::kInUse)};
    Make();
  }
  void TearDown() override {
    router_.reset();
    fs::remove_all(dir_);
  }
  /// (Re)creates the router over fresh recording providers that keep `local_ids`/`ssh_ids`.
  void Make() {
    router_.reset();
    auto local = std::make_unique<RecordingProvider>(&local_calls_);
    auto ssh = std::make_unique<RecordingProvider>(&ssh_calls_);
    local->ids = local_ids_;
    ssh->ids = ssh_ids_;
    local_ = local.get();
    ssh_ = ssh.get();
    auto router = RoutingProvider::Create(
        {.local = std::move(local), .ssh = std::move(ssh), .inventory = &inventory_,
         .state_file = state_file_});
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = std::move(*router);
  }
  static InstanceSpec Spec(std::string id, std::string type) {
    InstanceSpec spec;
    spec.instance_id = std::move(id);
    spec.cluster_id = "c1";
    spec.group = "g";
    spec.instance_type = std::move(type);
    return spec;
  }
  void Clear() {
    local_calls_.clear();
    ssh_calls_.clear();
  }

  std::string dir_, state_file_;
  MemoryInventory inventory_;
  std::vector<std::string> local_calls_, ssh_calls_;
  std::map<std::string, std::string> local_ids_, ssh_ids_;
  RecordingProvider* local_ = nullptr;
  RecordingProvider* ssh_ = nullptr;
  std::unique_ptr<RoutingProvider> router_;
};

TEST_F(RoutingProviderTest, LaunchChoosesByInventoryAndLaterCallsFollowTheLaunch) {
  ASSERT_TRUE(router_->launch(Spec("i-local", "ml.c5.xlarge")).ok());
  ASSERT_TRUE(router_->launch(Spec("i-ssh", "ml.p5.48xlarge")).ok());
  EXPECT_EQ(local_calls_, std::vector<std::string>{"launch i-local"});
  EXPECT_EQ(ssh_calls_, std::vector<std::string>{"launch i-ssh"});
  // A machine of the local instance's type registered later moves nothing already launched.
  inventory_.list.push_back(MachineOf("ml.c5.xlarge", pool::MachineState::kFree));
  Clear();
  for (const char* id : {"i-local", "i-ssh"}) {
    EXPECT_TRUE(router_->reboot(id).ok());
    EXPECT_TRUE(router_->powerCycle(id).ok());
    EXPECT_TRUE(router_->nodeInitPid(id).ok());
    EXPECT_TRUE(router_->launch(Spec(id, "ml.c5.xlarge")).ok());  // idempotent re-launch
    EXPECT_TRUE(router_->terminateNow(id).ok());
  }
  EXPECT_EQ(local_calls_, (std::vector<std::string>{"reboot i-local", "powerCycle i-local",
                                                     "nodeInitPid i-local", "launch i-local",
                                                     "terminateNow i-local"}));
  EXPECT_EQ(ssh_calls_, (std::vector<std::string>{"reboot i-ssh", "powerCycle i-ssh",
                                                   "nodeInitPid i-ssh", "launch i-ssh",
                                                   "terminateNow i-ssh"}));
  EXPECT_TRUE(router_->runsLifecycleScripts());
}

TEST_F(RoutingProviderTest, RoutesSurviveARecreate) {
  ASSERT_TRUE(router_->launch(Spec("i-local", "ml.c5.xlarge")).ok());
  ASSERT_TRUE(router_->launch(Spec("i-ssh", "ml.p5.48xlarge")).ok());
  local_ids_ = local_->ids;
  ssh_ids_ = ssh_->ids;
  // After the restart the inventory would send both elsewhere: the file decides.
  inventory_.list = {MachineOf("ml.c5.xlarge", pool::MachineState::kFree)};
  Make();
  EXPECT_EQ(router_->routeOf("i-local"), Route::kLocal);
  EXPECT_EQ(router_->routeOf("i-ssh"), Route::kSsh);
  Clear();
  EXPECT_TRUE(router_->terminate("i-local").ok());
  EXPECT_TRUE(router_->terminate("i-ssh").ok());
  EXPECT_EQ(local_calls_, std::vector<std::string>{"terminate i-local"});
  EXPECT_EQ(ssh_calls_, std::vector<std::string>{"terminate i-ssh"});
  EXPECT_EQ(fs::status(state_file_).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
}

TEST_F(RoutingProviderTest, ListMergesBothAndReadoptsUnknownIds) {
  ASSERT_TRUE(router_->launch(Spec("i-local", "ml.c5.xlarge")).ok());
  // Instances the router never recorded (a lost state file): re-adopted from list().
  local_->ids["i-old-local"] = "c1";
  ssh_->ids["i-old-ssh"] = "c1";
  ssh_->ids["i-other-cluster"] = "c2";
  auto listed = router_->list("c1");
  ASSERT_TRUE(listed.ok()) << listed.status();
  std::set<std::string> ids;
  for (const auto& o : *listed) ids.insert(o.instance_id);
  EXPECT_EQ(ids, (std::set<std::string>{"i-local", "i-old-local", "i-old-ssh"}));
  EXPECT_EQ(router_->routeOf("i-old-local"), Route::kLocal);
  EXPECT_EQ(router_->routeOf("i-old-ssh"), Route::kSsh);
  EXPECT_EQ(router_->routeOf("i-other-cluster"), std::nullopt);
  Clear();
  EXPECT_TRUE(router_->reboot("i-old-ssh").ok());
  EXPECT_TRUE(local_calls_.empty());
  EXPECT_EQ(ssh_calls_, std::vector<std::string>{"reboot i-old-ssh"});
}

TEST_F(RoutingProviderTest, UnknownIdsAreAskedOfBoth) {
  ssh_->ids["i-x"] = "c9";
  EXPECT_TRUE(router_->reboot("i-x").ok());  // local says NotFound, ssh has it
  EXPECT_TRUE(absl::IsNotFound(router_->reboot("i-none")));
  EXPECT_TRUE(router_->terminate("i-none").ok());  // a no-op on both
  EXPECT_EQ(local_calls_, (std::vector<std::string>{"reboot i-x", "reboot i-none",
                                                     "terminate i-none"}));
  EXPECT_EQ(ssh_calls_, (std::vector<std::string>{"reboot i-x", "reboot i-none",
                                                   "terminate i-none"}));
}

TEST_F(RoutingProviderTest, PodRoutesGoToTheLocalProviderOnly) {
  // Only local nodes run EKS pods; the ssh provider refuses Orchestrator.Eks groups.
  ASSERT_TRUE(router_->setPodRoutes("c1", {{"10.200.0.0/24", "10.224.0.2"}}).ok());
  EXPECT_EQ(local_calls_, std::vector<std::string>{"setPodRoutes c1 1"});
  EXPECT_TRUE(ssh_calls_.empty());
}

TEST_F(RoutingProviderTest, TerminatedRoutesAreForgottenOnceNotListed) {
  ASSERT_TRUE(router_->launch(Spec("i-ssh", "ml.p5.48xlarge")).ok());
  ASSERT_TRUE(router_->list("c1").ok());
  EXPECT_EQ(router_->routeOf("i-ssh"), Route::kSsh);  // listed, not terminating: kept
  ASSERT_TRUE(router_->terminate("i-ssh").ok());
  ASSERT_TRUE(router_->list("c1").ok());
  EXPECT_EQ(router_->routeOf("i-ssh"), std::nullopt);
  Make();  // and in the file too
  EXPECT_EQ(router_->routeOf("i-ssh"), std::nullopt);
}

TEST_F(RoutingProviderTest, ARelaunchAfterTerminateKeepsTheRoute) {
  ASSERT_TRUE(router_->launch(Spec("i-ssh", "ml.p5.48xlarge")).ok());
  ASSERT_TRUE(router_->terminate("i-ssh").ok());
  ASSERT_TRUE(router_->launch(Spec("i-ssh", "ml.p5.48xlarge")).ok());  // the same id again
  ssh_->ids.clear();  // between the old instance going and the new one being listed
  ASSERT_TRUE(router_->list("c1").ok());
  EXPECT_EQ(router_->routeOf("i-ssh"), Route::kSsh);
}

TEST_F(RoutingProviderTest, AFailedLaunchLeavesNoRoute) {
  ssh_->fail_launch = "no free machine of type ml.p5.48xlarge";
  auto st = router_->launch(Spec("i-ssh", "ml.p5.48xlarge"));
  EXPECT_TRUE(absl::IsResourceExhausted(st)) << st;
  EXPECT_TRUE(local_calls_.empty());  // no fallback to local nodes
  EXPECT_EQ(router_->routeOf("i-ssh"), std::nullopt);
}

TEST_F(RoutingProviderTest, AMalformedStateFileIsAnError) {
  router_.reset();
  std::ofstream(state_file_) << R"({"instances": {"i-1": {"provider": "cloud"}}})";
  auto router = RoutingProvider::Create({.local = std::make_unique<RecordingProvider>(&local_calls_),
                                         .ssh = std::make_unique<RecordingProvider>(&ssh_calls_),
                                         .inventory = &inventory_,
                                         .state_file = state_file_});
  EXPECT_TRUE(absl::IsInternal(router.status())) << router.status();
}

}  // namespace
}  // namespace hf::provider
