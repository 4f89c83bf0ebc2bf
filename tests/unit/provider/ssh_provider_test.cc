// The ssh provider's state transitions against a fake ssh runner and an in-memory machine
// inventory (the real ssh runs in tests/e2e/it_ssh_provider.py): allocation through hf_pool,
// shortfall, provisioning steps and their retries, reboot, cleanup and release, quarantine,
// hot spares, and adoption after a restart.
#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

#include <gtest/gtest.h>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/provider/ssh_provider.h"
#include "provider/local/sys.h"
#include "provider/ssh/scripts.h"

namespace hf::provider {
namespace {
namespace fs = std::filesystem;
using pool::MachineState;

constexpr char kType[] = "ml.c5.large";

class FakeInventory final : public MachineInventory {
 public:
  void add(const std::string& id, const std::string& address, const std::string& type = kType) {
    PoolMachine pm;
    pm.machine.id = id;
    pm.machine.instance_type = type;
    pm.access.address = address;
    pm.revision = 1;
    std::lock_guard lock(mu);
    machines_[id] = pm;
  }
  StatusOr<std::vector<PoolMachine>> machines() override {
    std::lock_guard lock(mu);
    std::vector<PoolMachine> out;
    for (auto& [id, pm] : machines_) out.push_back(pm);
    return out;
  }
  Status update(std::span<const PoolMachine> changed) override {
    std::lock_guard lock(mu);
    for (const auto& c : changed) {
      auto it = machines_.find(c.machine.id);
      if (it == machines_.end()) return absl::NotFoundError(c.machine.id);
      if (it->second.revision != c.revision) return absl::AbortedError("changed");
    }
    for (const auto& c : changed) {
      auto& pm = machines_[c.machine.id];
      pm.machine = c.machine;
      ++pm.revision;
    }
    return absl::OkStatus();
  }
  StatusOr<std::map<std::string, int, std::less<>>> spareTargets() override {
    std::lock_guard lock(mu);
    return targets;
  }
  pool::Machine get(const std::string& id) {
    std::lock_guard lock(mu);
    return machines_.at(id).machine;
  }
  std::mutex mu;
  std::map<std::string, int, std::less<>> targets;

 private:
  std::map<std::string, PoolMachine> machines_;
};

/// A machine as the fake ssh sees it.
struct FakeMachine {
  bool reachable = true;
  int drops_left = 0;  // next scripts fail as a dropped connection
  int boot = 1;
  std::string binary_sha;
  int base_runs = 0, identity_runs = 0, cleanups = 0, hosts_writes = 0, reboots = 0;
  bool agent_running = false;
  std::string identity_script;
  int fsx_probes = 0;
  std::string fsx_mount_line;  // what FsxMountProbeCommand prints
};

class FakeSsh {
 public:
  StatusOr<hf::ssh::SshResult> run(const hf::ssh::SshTarget& t, std::string_view command,
                               std::string_view input) {
    std::lock_guard lock(mu);
    FakeMachine& m = machines[t.address];
    if (!m.reachable) return absl::UnavailableError("ssh: connect: Connection timed out");
    const std::string in(input), cmd(command);
    hf::ssh::SshResult r;
    if (absl::StrContains(cmd, "systemctl reboot")) {
      ++m.boot;
      ++m.reboots;
      return absl::UnavailableError("Connection closed by remote host");
    }
    if (absl::StrContains(in, "@@step record")) {
      if (m.drops_left > 0) {
        --m.drops_left;
        return absl::UnavailableError("Connection reset by peer");
      }
      ++m.base_runs;
      r.out = "@@step record\n@@step packages\n@@step ami-layer\n@@base-ok\n";
    } else if (absl::StrContains(cmd, "@@step binary")) {
      m.binary_sha = local::Sha256Hex(in);
      r.out = "@@step binary\n@@binary-ok\n";
    } else if (absl::StrContains(in, "@@step identity")) {
      ++m.identity_runs;
      m.agent_running = true;
      m.identity_script = in;
      r.out = "@@step identity\n@@identity-ok\n";
    } else if (absl::StrContains(in, "@@step cleanup")) {
      ++m.cleanups;
      m.agent_running = false;
      m.binary_sha.clear();
      r.out = "@@step cleanup\n@@clean\n";
    } else if (absl::StrContains(in, "@@step hosts")) {
      ++m.hosts_writes;
    } else if (absl::StrContains(in, "boot_id=")) {
      r.out = "boot_id=boot-" + std::to_string(m.boot) + "\nbtime=" +
              std::to_string(1700000000 + 100 * m.boot) +
              "\nkernel_release=6.1.0-test\nmachine=x86_64\nnvidia_version=\n" +
              (m.binary_sha.empty() ? "" : "binary_sha256=" + m.binary_sha + "\n") +
              "disk_free_kib=10000000\n";
    } else if (absl::StrContains(cmd, "/proc/self/mountinfo")) {
      ++m.fsx_probes;
      r.out = m.fsx_mount_line;
    } else {
      r.exit_code = 127;
      r.err = "unknown script";
    }
    return r;
  }
  FakeMachine& at(const std::string& address) {
    std::lock_guard lock(mu);
    return machines[address];
  }
  std::mutex mu;
  std::map<std::string, FakeMachine> machines;
};

class SshProviderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ssh_provider_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    binary_ = (dir_ / "hyperfleet-node").string();
    ASSERT_TRUE(WriteFileAtomically(binary_, "#!fake node binary\n", 0755).ok());
  }
  void TearDown() override {
    provider_.reset();
    fs::remove_all(dir_);
  }
  SshProvider::Options options() {
    SshProvider::Options o;
    o.data_dir = (dir_ / "data").string();
    o.inventory = &inventory_;
    o.node_binary = binary_;
    o.agent_url = "https://10.250.0.1:9443";
    o.agent_cert_sha256 = std::string(64, 'a');
    o.agent_token = [](std::string_view id) { return "token-" + std::string(id); };
    o.retry_delay = std::chrono::milliseconds(0);
    o.shared_fsx = false;  // FsxMount runs real sshfs: tests/unit/provider/fsx_test.cc
    o.spare_interval = std::chrono::hours(1);
    o.ssh_run = [this](const hf::ssh::SshTarget& t, std::string_view c, std::string_view i,
                       Duration) { return ssh_.run(t, c, i); };
    o.on_event = [this](const SshProviderEvent& e) {
      std::lock_guard lock(events_mu_);
      events_.push_back(e);
    };
    return o;
  }
  void start() {
    auto p = SshProvider::Create(options());
    ASSERT_TRUE(p.ok()) << p.status();
    provider_ = std::move(*p);
  }
  InstanceSpec spec(const std::string& id) {
    InstanceSpec s;
    s.instance_id = id;
    s.cluster_id = "c1";
    s.cluster_name = "demo";
    s.group = "workers";
    s.instance_type = kType;
    s.lifecycle = {{"SourceS3Uri", "s3://bucket/lcs/"}, {"OnCreate", "on_create.sh"}};
    return s;
  }
  InstanceObservation only(const std::string& cluster = "c1") {
    auto l = provider_->list(cluster);
    EXPECT_TRUE(l.ok());
    EXPECT_EQ(l->size(), 1u);
    return l->empty() ? InstanceObservation{} : l->front();
  }

  fs::path dir_;
  std::string binary_;
  FakeInventory inventory_;
  FakeSsh ssh_;
  std::unique_ptr<SshProvider> provider_;
  std::mutex events_mu_;
  std::vector<SshProviderEvent> events_;
};

TEST_F(SshProviderTest, LaunchTakesAFreeMachineProvisionsItAndRuns) {
  inventory_.add("m-000000000001", "10.250.0.11");
  start();
  ASSERT_TRUE(provider_->launch(spec("i-1")).ok());
  ASSERT_TRUE(provider_->launch(spec("i-1")).ok());  // idempotent
  provider_->waitIdleForTest();
  const InstanceObservation o = only();
  EXPECT_EQ(o.state, InstanceState::kRunning) << o.message;
  EXPECT_EQ(o.private_ip, "10.250.0.11");  // the machine's address, not a requested one
  EXPECT_EQ(o.hostname, "ip-10-250-0-11");
  EXPECT_EQ(o.boot_time, SystemTime(std::chrono::seconds(1700000100)));
  const pool::Machine m = inventory_.get("m-000000000001");
  EXPECT_EQ(m.state, MachineState::kInUse);
  EXPECT_EQ(m.node, "i-1");
  EXPECT_EQ(m.cluster, "c1");
  FakeMachine& fm = ssh_.at("10.250.0.11");
  EXPECT_EQ(fm.base_runs, 1);
  EXPECT_EQ(fm.identity_runs, 1);
  EXPECT_TRUE(fm.agent_running);
  EXPECT_EQ(fm.binary_sha, local::Sha256Hex("#!fake node binary\n"));
  // agent.env as the identity script writes it.
  const std::string& script = fm.identity_script;
  const std::string head = "base64 -d > '/etc/hyperfleet/agent.env.hf-new' <<'HF_B64'\n";
  const size_t from = script.find(head);
  ASSERT_NE(from, std::string::npos);
  const size_t to = script.find("HF_B64\n", from + head.size());
  std::string b64 = script.substr(from + head.size(), to - from - head.size());
  b64.erase(std::remove(b64.begin(), b64.end(), '\n'), b64.end());
  std::string env;
  ASSERT_TRUE(absl::Base64Unescape(b64, &env));
  EXPECT_EQ(env,
            "HF_AGENT_URL=https://10.250.0.1:9443\nHF_INSTANCE_ID=i-1\nHF_AGENT_TOKEN=token-i-1\n"
            "HF_AGENT_CERT_SHA256=" + std::string(64, 'a') + "\n"
            "HF_IMDS=serve\nHF_IMDS_INSTANCE_TYPE=ml.c5.large\nHF_IMDS_LOCAL_IPV4=10.250.0.11\n"
            "HF_IMDS_HOSTNAME=ip-10-250-0-11\nHF_IMDS_REGION=us-west-2\n");
}

TEST_F(SshProviderTest, AReplacementKeepsTheReplacedNodesNameOnItsNewAddress) {
  // Slurm knows the node by its name: the replacement runs on another machine (another
  // address) under the replaced node's name, so slurm.conf's NodeName stays, NodeAddr moves.
  inventory_.add("m-000000000001", "10.250.0.12");
  start();
  InstanceSpec s = spec("i-2");
  s.private_ip = "10.250.0.11";
  s.hostname = "ip-10-250-0-11";
  ASSERT_TRUE(provider_->launch(s).ok());
  provider_->waitIdleForTest();
  const InstanceObservation o = only();
  EXPECT_EQ(o.state, InstanceState::kRunning) << o.message;
  EXPECT_EQ(o.private_ip, "10.250.0.12");
  EXPECT_EQ(o.hostname, "ip-10-250-0-11");
  EXPECT_NE(ssh_.at("10.250.0.12").identity_script.find("ip-10-250-0-11"), std::string::npos);
}

TEST(SshScriptsTest, KeptHostnameTakesOnlyAValidHostLabel) {
  EXPECT_EQ(ssh_scripts::KeptHostname("ip-10-1-2-3", "10.9.9.9"), "ip-10-1-2-3");
  EXPECT_EQ(ssh_scripts::KeptHostname("", "10.9.9.9"), "ip-10-9-9-9");
  EXPECT_EQ(ssh_scripts::KeptHostname("a;rm -rf /", "10.9.9.9"), "ip-10-9-9-9");
  EXPECT_EQ(ssh_scripts::KeptHostname("-x", "10.9.9.9"), "ip-10-9-9-9");
  EXPECT_EQ(ssh_scripts::KeptHostname("UPPER", "10.9.9.9"), "ip-10-9-9-9");
  EXPECT_EQ(ssh_scripts::KeptHostname(std::string(64, 'a'), "10.9.9.9"), "ip-10-9-9-9");
}

TEST_F(SshProviderTest, NoFreeMachineFailsWithThePoolsShortfall) {
  inventory_.add("m-000000000001", "10.250.0.11", "ml.p5.48xlarge");
  start();
  ASSERT_TRUE(provider_->launch(spec("i-1")).ok());
  provider_->waitIdleForTest();
  const InstanceObservation o = only();
  EXPECT_EQ(o.state, InstanceState::kFailed);
  EXPECT_TRUE(absl::StartsWith(o.message, "Insufficient capacity for ml.c5.large")) << o.message;
  EXPECT_EQ(inventory_.get("m-000000000001").state, MachineState::kFree);
}

TEST_F(SshProviderTest, AnEksNodeFailsAtOnceAndTakesNoMachine) {
  inventory_.add("m-000000000001", "10.250.0.11");
  start();
  InstanceSpec s = spec("i-1");
  s.image_variant = NodeImageVariant::kEks;
  ASSERT_TRUE(provider_->launch(s).ok());
  provider_->waitIdleForTest();
  const InstanceObservation o = only();
  EXPECT_EQ(o.state, InstanceState::kFailed);
  EXPECT_TRUE(absl::StartsWith(o.message, "The ssh provider does not run EKS nodes")) << o.message;
  EXPECT_EQ(inventory_.get("m-000000000001").state, MachineState::kFree);
  EXPECT_EQ(ssh_.at("10.250.0.11").base_runs, 0);
}

TEST_F(SshProviderTest, TerminatingAnInstanceThatGotNoMachineTakesNone) {
  start();
  ASSERT_TRUE(provider_->launch(spec("i-1")).ok());
  provider_->waitIdleForTest();
  EXPECT_EQ(only().state, InstanceState::kFailed);
  inventory_.add("m-000000000001", "10.250.0.11");  // registered after the shortfall
  ASSERT_TRUE(provider_->terminate("i-1").ok());
  provider_->waitIdleForTest();
  EXPECT_TRUE(provider_->list("c1")->empty());
  EXPECT_EQ(ssh_.at("10.250.0.11").cleanups, 0);
  EXPECT_EQ(inventory_.machines()->front().revision, 1);  // never written
}

/// The registry's view with every machine drained.
class DrainedView final : public MachineInventory {
 public:
  explicit DrainedView(FakeInventory& inner) : inner_(inner) {}
  StatusOr<std::vector<PoolMachine>> machines() override {
    HF_ASSIGN_OR_RETURN(auto all, inner_.machines());
    for (auto& pm : all) pm.drained = true;
    return all;
  }
  Status update(std::span<const PoolMachine> c) override { return inner_.update(c); }
  StatusOr<std::map<std::string, int, std::less<>>> spareTargets() override {
    return inner_.spareTargets();
  }

 private:
  FakeInventory& inner_;
};

TEST_F(SshProviderTest, DrainedMachinesAreNeverGrantedNorMadeSpares) {
  inventory_.add("m-000000000001", "10.250.0.11");
  inventory_.targets[kType] = 1;
  DrainedView view(inventory_);
  auto o = options();
  o.inventory = &view;
  auto p = SshProvider::Create(o);
  ASSERT_TRUE(p.ok()) << p.status();
  provider_ = std::move(*p);
  provider_->runSparePassForTest();
  EXPECT_EQ(inventory_.get("m-000000000001").state, MachineState::kFree);
  ASSERT_TRUE(provider_->launch(spec("i-1")).ok());
  provider_->waitIdleForTest();
  EXPECT_EQ(only().state, InstanceState::kFailed);
  EXPECT_EQ(inventory_.get("m-000000000001").state, MachineState::kFree);
}

TEST_F(SshProviderTest, DroppedSshIsRetriedThenFailsNamingTheStep) {
  inventory_.add("m-000000000001", "10.250.0.11");
  inventory_.add("m-000000000002", "10.250.0.12");
  ssh_.at("10.250.0.11").drops_left = 2;  // fewer than the 3 attempts
  ssh_.at("10.250.0.12").drops_left = 5;
  start();
  ASSERT_TRUE(provider_->launch(spec("i-1")).ok());
  provider_->waitIdleForTest();
  ASSERT_TRUE(provider_->launch(spec("i-2")).ok());
  provider_->waitIdleForTest();
  auto l = *provider_->list("c1");
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0].state, InstanceState::kRunning) << l[0].message;
  EXPECT_EQ(l[1].state, InstanceState::kFailed);
  EXPECT_TRUE(absl::StrContains(l[1].message, "step base")) << l[1].message;
  EXPECT_TRUE(absl::StrContains(l[1].message, "3 times")) << l[1].message;
}

TEST_F(SshProviderTest, RebootWaitsForANewBootAndMovesBootTime) {
  inventory_.add("m-000000000001", "10.250.0.11");
  start();
  ASSERT_TRUE(provider_->launch(spec("i-1")).ok());
  provider_->waitIdleForTest();
  const SystemTime before = only().boot_time;
  EXPECT_TRUE(absl::IsNotFound(provider_->reboot("i-9")));
  ASSERT_TRUE(provider_->reboot("i-1").ok());
  provider_->waitIdleForTest();
  const InstanceObservation o = only();
  EXPECT_EQ(o.state, InstanceState::kRunning) << o.message;
  EXPECT_GT(o.boot_time, before);
  EXPECT_EQ(ssh_.at("10.250.0.11").reboots, 1);
  EXPECT_EQ(inventory_.get("m-000000000001").state, MachineState::kInUse);
}

TEST_F(SshProviderTest, TerminateCleansTheMachineAndReleasesIt) {
  inventory_.add("m-000000000001", "10.250.0.11");
  start();
  ASSERT_TRUE(provider_->launch(spec("i-1")).ok());
  provider_->waitIdleForTest();
  ASSERT_TRUE(provider_->terminate("i-1").ok());
  provider_->waitIdleForTest();
  EXPECT_TRUE(provider_->list("c1")->empty());
  FakeMachine& fm = ssh_.at("10.250.0.11");
  EXPECT_EQ(fm.cleanups, 1);
  EXPECT_FALSE(fm.agent_running);
  const pool::Machine m = inventory_.get("m-000000000001");
  EXPECT_EQ(m.state, MachineState::kFree);
  EXPECT_TRUE(m.node.empty());
  EXPECT_FALSE(fs::exists(dir_ / "data/ssh/nodes/i-1.json"));
  EXPECT_FALSE(fs::exists(dir_ / "data/ssh/clusters/c1"));  // the cluster's munge key went
}

TEST_F(SshProviderTest, TerminateNowQuarantinesTheMachineWithoutTouchingIt) {
  inventory_.add("m-000000000001", "10.250.0.11");
  start();
  ASSERT_TRUE(provider_->launch(spec("i-1")).ok());
  provider_->waitIdleForTest();
  ssh_.at("10.250.0.11").reachable = false;
  ASSERT_TRUE(provider_->terminateNow("i-1").ok());
  provider_->waitIdleForTest();
  EXPECT_TRUE(provider_->list("c1")->empty());
  const pool::Machine m = inventory_.get("m-000000000001");
  EXPECT_EQ(m.state, MachineState::kQuarantined);
  EXPECT_TRUE(absl::StrContains(m.reason, "i-1")) << m.reason;
  EXPECT_EQ(ssh_.at("10.250.0.11").cleanups, 0);
  std::lock_guard lock(events_mu_);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].kind, SshProviderEvent::Kind::kMachineQuarantined);
  EXPECT_EQ(events_[0].machine_id, "m-000000000001");
}

TEST_F(SshProviderTest, ACleanupThatCannotRunQuarantines) {
  inventory_.add("m-000000000001", "10.250.0.11");
  start();
  ASSERT_TRUE(provider_->launch(spec("i-1")).ok());
  provider_->waitIdleForTest();
  ssh_.at("10.250.0.11").reachable = false;
  ASSERT_TRUE(provider_->terminate("i-1").ok());
  provider_->waitIdleForTest();
  const pool::Machine m = inventory_.get("m-000000000001");
  EXPECT_EQ(m.state, MachineState::kQuarantined);
  EXPECT_TRUE(absl::StrContains(m.reason, "cleanup after node i-1 failed")) << m.reason;
}

TEST_F(SshProviderTest, AHotSpareIsProvisionedAheadAndTakesTheNextLaunch) {
  inventory_.add("m-000000000001", "10.250.0.11");
  inventory_.add("m-000000000002", "10.250.0.12");
  inventory_.targets[kType] = 1;
  start();
  provider_->runSparePassForTest();
  const pool::Machine spare = inventory_.get("m-000000000001");
  EXPECT_EQ(spare.state, MachineState::kSpareReady);
  EXPECT_EQ(ssh_.at("10.250.0.11").base_runs, 1);
  EXPECT_EQ(ssh_.at("10.250.0.11").identity_runs, 0);  // no identity, no agent yet
  EXPECT_FALSE(ssh_.at("10.250.0.11").agent_running);
  ASSERT_TRUE(provider_->launch(spec("i-1")).ok());
  provider_->waitIdleForTest();
  const InstanceObservation o = only();
  EXPECT_EQ(o.state, InstanceState::kRunning) << o.message;
  EXPECT_EQ(o.private_ip, "10.250.0.11");
  EXPECT_EQ(ssh_.at("10.250.0.11").base_runs, 1);  // only the identity was written
  EXPECT_EQ(ssh_.at("10.250.0.11").identity_runs, 1);
  {
    std::lock_guard lock(events_mu_);
    ASSERT_FALSE(events_.empty());
    EXPECT_EQ(events_[0].kind, SshProviderEvent::Kind::kSpareTaken);
    EXPECT_EQ(events_[0].instance_id, "i-1");
    EXPECT_EQ(events_[0].machine_id, "m-000000000001");
  }
  // The pool is refilled from the free machine.
  provider_->runSparePassForTest();
  EXPECT_EQ(inventory_.get("m-000000000002").state, MachineState::kSpareReady);
  // No spare kept any more (`machines spares TYPE 0` removes the target): it retires.
  {
    std::lock_guard lock(inventory_.mu);
    inventory_.targets.clear();
  }
  provider_->runSparePassForTest();
  EXPECT_EQ(inventory_.get("m-000000000002").state, MachineState::kFree);
}

TEST_F(SshProviderTest, AQuarantinedMachineReturnedByAnOperatorIsCleanedAndFreed) {
  inventory_.add("m-000000000001", "10.250.0.11");
  start();
  ASSERT_TRUE(provider_->launch(spec("i-1")).ok());
  provider_->waitIdleForTest();
  ASSERT_TRUE(provider_->terminateNow("i-1").ok());
  provider_->waitIdleForTest();
  // The operator returns it (`hyperfleet machines return`): Apply(kOperatorReturn).
  auto pm = inventory_.machines()->front();
  auto t = pool::Apply(pm.machine, pool::Report::kOperatorReturn, SshProvider::DefaultPolicy(),
                       std::chrono::system_clock::now());
  ASSERT_TRUE(t.ok()) << t.status();
  pm.machine = t->machine;
  ASSERT_TRUE(inventory_.update(std::span<const PoolMachine>(&pm, 1)).ok());
  provider_->runSparePassForTest();
  EXPECT_EQ(inventory_.get("m-000000000001").state, MachineState::kFree);
  EXPECT_EQ(ssh_.at("10.250.0.11").cleanups, 1);
}

TEST_F(SshProviderTest, ARestartedProviderAdoptsItsNodes) {
  inventory_.add("m-000000000001", "10.250.0.11");
  start();
  ASSERT_TRUE(provider_->launch(spec("i-1")).ok());
  provider_->waitIdleForTest();
  provider_.reset();
  start();
  const InstanceObservation o = only();
  EXPECT_EQ(o.state, InstanceState::kRunning);
  EXPECT_EQ(o.private_ip, "10.250.0.11");
  EXPECT_EQ(ssh_.at("10.250.0.11").identity_runs, 1);  // not provisioned again
  ASSERT_TRUE(provider_->terminate("i-1").ok());
  provider_->waitIdleForTest();
  EXPECT_EQ(inventory_.get("m-000000000001").state, MachineState::kFree);
  EXPECT_EQ(ssh_.at("10.250.0.11").cleanups, 1);  // on its machine, reached after adoption
}

TEST_F(SshProviderTest, CreateChecksItsOptions) {
  auto o = options();
  o.agent_url = "10.0.0.1:9443";
  EXPECT_TRUE(absl::IsInvalidArgument(SshProvider::Create(o).status()));
  o = options();
  o.node_binary = (dir_ / "missing").string();
  EXPECT_TRUE(absl::IsFailedPrecondition(SshProvider::Create(o).status()));
  o = options();
  o.inventory = nullptr;
  EXPECT_TRUE(absl::IsInvalidArgument(SshProvider::Create(o).status()));
}

TEST_F(SshProviderTest, FsxInTheProvisioningParametersSkipsTheDefaultFsx) {
  // The lifecycle scripts mount FSx (HyperPod's mount_fsx.sh): no sshfs is started (it would
  // need a real ssh connection and fail within fsx_timeout), and provisioning goes on.
  // Loopback addresses: a wrong sshfs start stays on this host.
  inventory_.add("m-000000000001", "127.0.0.11");
  inventory_.add("m-000000000002", "127.0.0.12");
  SshProvider::Options o = options();
  o.shared_fsx = true;
  o.fsx_timeout = std::chrono::milliseconds(500);
  std::mutex asked_mu;
  std::vector<std::string> asked;
  o.provisioning_parameters = [&](std::string_view uri) -> StatusOr<std::string> {
    std::lock_guard lock(asked_mu);
    asked.emplace_back(uri);
    if (uri == "s3://bucket/bad/") return std::string(R"({"fsx_dns_name": "fs-1.fsx.x"})");
    return std::string(
        R"({"controller_group": "c", "fsx_dns_name": "fs-0123.fsx.us-west-2.amazonaws.com",)"
        R"( "fsx_mountname": "abcdefgh"})");
  };
  auto p = SshProvider::Create(o);
  ASSERT_TRUE(p.ok()) << p.status();
  provider_ = std::move(*p);
  ASSERT_TRUE(provider_->launch(spec("i-1")).ok());
  provider_->waitIdleForTest();
  InstanceObservation obs = only();
  EXPECT_EQ(obs.state, InstanceState::kRunning) << obs.message;
  EXPECT_EQ(ssh_.at("127.0.0.11").fsx_probes, 1);
  EXPECT_EQ(ssh_.at("127.0.0.11").identity_runs, 1);
  {
    std::lock_guard lock(asked_mu);
    EXPECT_EQ(asked, std::vector<std::string>{"s3://bucket/lcs/"});
  }
  // Half an FSx (one key of the two): the node fails, naming the file.
  InstanceSpec bad = spec("i-2");
  bad.cluster_id = "c2";
  bad.lifecycle["SourceS3Uri"] = "s3://bucket/bad/";
  ASSERT_TRUE(provider_->launch(bad).ok());
  provider_->waitIdleForTest();
  obs = only("c2");
  EXPECT_EQ(obs.state, InstanceState::kFailed);
  EXPECT_TRUE(absl::StrContains(obs.message, "provisioning_parameters.json")) << obs.message;
  EXPECT_EQ(ssh_.at("127.0.0.12").identity_runs, 0);
}

}  // namespace
}  // namespace hf::provider
