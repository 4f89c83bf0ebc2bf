// The registry against real things: an sshd on 127.0.0.1 (this host is the machine), the
// SQLite store in a file, the key files on disk. Registration, wrong host key, unreachable,
// twice, catalog checks and the override, removal in use, drain, return, updates, the
// MachineInventory's compare-and-swap, and that the key is never returned nor logged.
#include "hyperfleet/machines/registry.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <filesystem>
#include <sstream>

#include "hyperfleet/common/fs.h"
#include "hyperfleet/machines/machines_service.h"
#include "unit/ssh/local_sshd.h"

namespace hf::machines {
namespace {

namespace fs = std::filesystem;

int ModeOf(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 07777) : -1;
}

class RegistryTest : public ::testing::TestWithParam<unsigned> {
 protected:
  void SetUp() override {
    if (!testing::LocalSshd::Available()) GTEST_SKIP() << "no sshd (openssh-server) on this host";
    char tmpl[] = "/tmp/hf-machines-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ + "/sshd");
    ASSERT_EQ(sshd_.Start(dir_ + "/sshd"), "");
    auto s = store::OpenSqliteStore(dir_ + "/state.db");
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(s).value();
    RegistryOptions options;
    options.dir = dir_ + "/data/machines";
    options.connect_timeout_seconds = 5;
    options.allow_loopback = true;  // the test's sshd listens on 127.0.0.1
    registry_ = std::make_unique<MachineRegistry>(*store_, clock_, ids_,
                                                  model::InstanceCatalog::Embedded(), options);
    old_umask_ = ::umask(GetParam());
    sink_ = std::make_shared<spdlog::sinks::ostream_sink_mt>(log_);
    old_logger_ = spdlog::default_logger();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink_));
  }
  void TearDown() override {
    if (old_logger_) spdlog::set_default_logger(old_logger_);
    ::umask(old_umask_);
    registry_.reset();
    store_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  RegisterRequest Request(std::string type = "ml.c5.large") {
    return {.address = "127.0.0.1", .port = sshd_.port(), .user = sshd_.user(),
            .private_key = *ReadFile(sshd_.client_key()), .host_key = sshd_.host_public_key(),
            .instance_type = std::move(type)};
  }
  // The key's body, which must never leave the key file.
  std::string KeyBody() {
    const std::string k = *ReadFile(sshd_.client_key());
    return k.substr(40, 40);
  }
  void SetPoolState(const std::string& id, pool::MachineState state) {
    StoreMachineInventory inv(*registry_);
    auto all = inv.machines();
    ASSERT_TRUE(all.ok());
    for (auto m : *all) {
      if (m.machine.id != id) continue;
      m.machine.state = state;
      m.machine.cluster = state == pool::MachineState::kInUse ? "c-1" : "";
      m.machine.node = state == pool::MachineState::kInUse ? "i-0123456789abcdef0" : "";
      ASSERT_TRUE(inv.update({&m, 1}).ok());
    }
  }

  std::string dir_;
  testing::LocalSshd sshd_;
  std::unique_ptr<store::Store> store_;
  SystemClock clock_;
  SequentialIdSource ids_{7};
  std::unique_ptr<MachineRegistry> registry_;
  unsigned old_umask_ = 022;
  std::ostringstream log_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> old_logger_;
};

TEST_P(RegistryTest, RegistersProbesAndKeepsTheKeyOwnerOnly) {
  auto r = registry_->registerMachine(Request());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->id.starts_with("m-")) << r->id;
  EXPECT_EQ(r->id.size(), 14u);
  EXPECT_EQ(r->address, "127.0.0.1");
  EXPECT_GE(r->facts.cpus, 1);
  EXPECT_GT(r->facts.memory_gib, 0);
  EXPECT_EQ(r->facts.arch, "x86_64");
  EXPECT_FALSE(r->facts.os_id.empty());
  EXPECT_EQ(r->pool.state, pool::MachineState::kFree);
  EXPECT_EQ(r->host_key.find(" test"), std::string::npos);  // the comment is dropped
  const auto access = registry_->accessOf(*r);
  EXPECT_EQ(ModeOf(dir_ + "/data/machines"), 0700);
  EXPECT_EQ(ModeOf(fs::path(access.identity_file).parent_path()), 0700);
  EXPECT_EQ(ModeOf(access.identity_file), 0600);
  EXPECT_EQ(ModeOf(access.known_hosts_file), 0600);
  // The inventory reaches it with those files.
  StoreMachineInventory inv(*registry_);
  auto all = inv.machines();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].access.identity_file, access.identity_file);
  EXPECT_EQ((*all)[0].machine.id, r->id);
  // Never in a response or the log.
  const std::string described = MachinesService::Describe(*r).dump();
  EXPECT_EQ(described.find(KeyBody()), std::string::npos);
  EXPECT_EQ(described.find("PRIVATE KEY"), std::string::npos);
  EXPECT_NE(log_.str().find(r->id), std::string::npos) << log_.str();
  EXPECT_EQ(log_.str().find(KeyBody()), std::string::npos);
}

TEST_P(RegistryTest, WrongHostKeyRefusedNothingKept) {
  auto req = Request();
  req.host_key = sshd_.wrong_host_public_key();
  auto r = registry_->registerMachine(req);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(std::string(r.status().message()).find("HostPublicKey does not match"), std::string::npos)
      << r.status();
  EXPECT_TRUE(registry_->list()->empty());
  EXPECT_TRUE(fs::is_empty(dir_ + "/data/machines"));
}

TEST_P(RegistryTest, UnreachableRefused) {
  auto req = Request();
  req.port = testing::LocalSshd::FreePort();
  auto r = registry_->registerMachine(req);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(std::string(r.status().message()).find("cannot reach"), std::string::npos) << r.status();
  EXPECT_TRUE(registry_->list()->empty());
}

TEST_P(RegistryTest, AddressesThatAreNotAMachineOfItsOwnAreRefused) {
  // Loopback would make the control-plane host a node of its own cluster.
  RegistryOptions strict;
  strict.dir = dir_ + "/data/strict";
  MachineRegistry registry(*store_, clock_, ids_, model::InstanceCatalog::Embedded(), strict);
  for (const char* address : {"127.0.0.1", "127.1", "localhost", "0.0.0.0", "255.255.255.255",
                              "224.0.0.1", "169.254.169.254"}) {
    auto req = Request();
    req.address = address;
    auto r = registry.registerMachine(req);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << address << r.status();
    EXPECT_NE(std::string(r.status().message()).find("an address of its own"), std::string::npos)
        << r.status();
  }
  EXPECT_TRUE(registry.list()->empty());
  EXPECT_FALSE(fs::exists(dir_ + "/data/strict"));
}

TEST_P(RegistryTest, TwiceIsAConflict) {
  ASSERT_TRUE(registry_->registerMachine(Request()).ok());
  auto again = registry_->registerMachine(Request());
  ASSERT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition) << again.status();
  EXPECT_NE(std::string(again.status().message()).find("registered at 127.0.0.1"), std::string::npos);
  EXPECT_EQ(registry_->list()->size(), 1u);
}

TEST_P(RegistryTest, AGpuTypeWithoutGpusRefusedUnlessOverridden) {
  auto r = registry_->registerMachine(Request("ml.p5.48xlarge"));
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(std::string(r.status().message())
                .find("GPUs: the machine has 0 NVIDIA GPUs, ml.p5.48xlarge has 8 (H100)"),
            std::string::npos)
      << r.status();
  EXPECT_TRUE(registry_->list()->empty());
  auto req = Request("ml.p5.48xlarge");
  req.override_checks = true;
  auto kept = registry_->registerMachine(req);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_TRUE(kept->override_checks);
  ASSERT_FALSE(kept->mismatches.empty());
  EXPECT_TRUE(kept->mismatches[0].starts_with("GPUs:")) << kept->mismatches[0];
}

TEST_P(RegistryTest, BadFieldsNamed) {
  struct Case {
    RegisterRequest req;
    std::string_view field;
  } cases[] = {
      {[&] { auto r = Request(); r.address = "-oProxyCommand=sh"; return r; }(), "Address"},
      {[&] { auto r = Request(); r.user = "a b"; return r; }(), "User"},
      {[&] { auto r = Request(); r.private_key = "hunter2"; return r; }(), "SshPrivateKey"},
      {[&] { auto r = Request(); r.host_key = "ssh-ed25519 !!"; return r; }(), "HostPublicKey"},
      {[&] { auto r = Request(); r.instance_type = "ml.nope"; return r; }(), "InstanceType"},
      {[&] { auto r = Request(); r.port = 0; return r; }(), "Port"},
  };
  for (const auto& c : cases) {
    auto r = registry_->registerMachine(c.req);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(std::string(r.status().message()).find(c.field), std::string::npos) << r.status();
    EXPECT_EQ(std::string(r.status().message()).find("hunter2"), std::string::npos);
  }
  EXPECT_TRUE(registry_->list()->empty());
}

TEST_P(RegistryTest, RemovalRefusedWhileInUseThenRemovesTheKey) {
  auto r = registry_->registerMachine(Request());
  ASSERT_TRUE(r.ok()) << r.status();
  SetPoolState(r->id, pool::MachineState::kInUse);
  auto s = registry_->deregister(r->id);
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(AwsErrorTypeOf(s).value_or(""), "ResourceInUse");
  EXPECT_NE(std::string(s.message()).find("i-0123456789abcdef0"), std::string::npos) << s;
  SetPoolState(r->id, pool::MachineState::kFree);
  ASSERT_TRUE(registry_->deregister(r->id).ok());
  EXPECT_FALSE(fs::exists(dir_ + "/data/machines/" + r->id));
  EXPECT_EQ(registry_->describe(r->id).status().code(), absl::StatusCode::kNotFound);
}

TEST_P(RegistryTest, DrainReturnAndSpareTargets) {
  auto r = registry_->registerMachine(Request());
  ASSERT_TRUE(r.ok()) << r.status();
  auto d = registry_->setDrained(r->id, true);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->drained);
  StoreMachineInventory inv(*registry_);
  EXPECT_TRUE((*inv.machines())[0].drained);
  EXPECT_FALSE(registry_->setDrained(r->id, false)->drained);

  EXPECT_EQ(registry_->returnMachine(r->id).status().code(), absl::StatusCode::kFailedPrecondition);
  SetPoolState(r->id, pool::MachineState::kQuarantined);
  auto back = registry_->returnMachine(r->id);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->pool.state, pool::MachineState::kChecking);

  EXPECT_EQ(registry_->putSpareTarget("ml.nope", 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->putSpareTarget("ml.c5.large", -1).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(registry_->putSpareTarget("ml.c5.large", 2).ok());
  EXPECT_EQ(*inv.spareTargets(), (std::map<std::string, int, std::less<>>{{"ml.c5.large", 2}}));
}

TEST_P(RegistryTest, InventoryUpdateIsCompareAndSwap) {
  auto r = registry_->registerMachine(Request());
  ASSERT_TRUE(r.ok()) << r.status();
  StoreMachineInventory inv(*registry_);
  auto read = inv.machines();
  ASSERT_TRUE(read.ok());
  auto stale = (*read)[0];
  // The registry writes in between (an operator drains it).
  ASSERT_TRUE(registry_->setDrained(r->id, true).ok());
  stale.machine.state = pool::MachineState::kInUse;
  EXPECT_EQ(inv.update({&stale, 1}).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(registry_->describe(r->id)->pool.state, pool::MachineState::kFree);
  // Read again: written, and the registry's drained flag kept.
  auto fresh = (*inv.machines())[0];
  fresh.machine.state = pool::MachineState::kInUse;
  ASSERT_TRUE(inv.update({&fresh, 1}).ok());
  auto now = registry_->describe(r->id);
  EXPECT_EQ(now->pool.state, pool::MachineState::kInUse);
  EXPECT_TRUE(now->drained);
  provider::PoolMachine unknown = fresh;
  unknown.machine.id = "m-000000000000";
  EXPECT_EQ(inv.update({&unknown, 1}).code(), absl::StatusCode::kNotFound);
}

TEST_P(RegistryTest, UpdateReachesWithTheNewSettingsBeforeKeepingThem) {
  auto r = registry_->registerMachine(Request());
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string kh = registry_->accessOf(*r).known_hosts_file;
  const std::string before = *ReadFile(kh);
  UpdateRequest bad;
  bad.id = r->id;
  bad.host_key = sshd_.wrong_host_public_key();
  auto refused = registry_->update(bad);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_EQ(*ReadFile(kh), before);
  EXPECT_EQ(registry_->describe(r->id)->host_key, r->host_key);
  UpdateRequest ok;
  ok.id = r->id;
  ok.user = sshd_.user();
  ok.private_key = *ReadFile(sshd_.client_key());
  auto updated = registry_->update(ok);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_GT(updated->revision, r->revision);
  EXPECT_FALSE(fs::exists(kh + ".new"));
  EXPECT_EQ(ModeOf(registry_->accessOf(*r).identity_file), 0600);
}

INSTANTIATE_TEST_SUITE_P(Umasks, RegistryTest, ::testing::Values(022u, 077u, 0u));

}  // namespace
}  // namespace hf::machines
