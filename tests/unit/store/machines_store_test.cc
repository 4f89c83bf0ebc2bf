// Registered machines and spare targets in the real SQLite store (file and in memory):
// round trip of every field, compare-and-swap, one machine per (address, port), erase.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "hyperfleet/store/store.h"

namespace hf::store {
namespace {

namespace fs = std::filesystem;

class MachineStoreTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam()) {
      dir_ = fs::temp_directory_path() / ("hf-mstore-" + std::to_string(getpid()) + "-" +
                                          ::testing::UnitTest::GetInstance()->current_test_info()->name());
      fs::remove_all(dir_);
      fs::create_directories(dir_);
      path_ = (dir_ / "state.db").string();
    } else {
      path_ = ":memory:";
    }
    auto s = OpenSqliteStore(path_);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(s).value();
  }
  void TearDown() override {
    store_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  static MachineRecord Make(const std::string& id, const std::string& address, uint16_t port = 22) {
    MachineRecord r;
    r.id = id;
    r.address = address;
    r.port = port;
    r.user = "admin";
    r.host_name = "gpu7.lab";
    r.host_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";
    r.instance_type = "ml.g5.xlarge";
    r.facts = {.cpus = 4, .memory_gib = 15.4, .gpus = 1, .gpu_model = "NVIDIA A10G",
               .neuron_devices = 0, .os_id = "ubuntu", .os_version = "22.04", .arch = "x86_64"};
    r.override_checks = true;
    r.mismatches = {"memory 15.4 GiB < 16 GiB"};
    r.registered_at = FromEpochSeconds(1700000000.5);
    r.pool.id = id;
    r.pool.instance_type = r.instance_type;
    r.pool.state = pool::MachineState::kQuarantined;
    r.pool.since = FromEpochSeconds(1700000100);
    r.pool.last_check = FromEpochSeconds(1700000050);
    r.pool.cluster = "c-1";
    r.pool.node = "i-1";
    r.pool.reason = "2 failures within 7 days";
    r.pool.failures = {FromEpochSeconds(1700000060), FromEpochSeconds(1700000090)};
    return r;
  }

  fs::path dir_;
  std::string path_;
  std::unique_ptr<Store> store_;
};

TEST_P(MachineStoreTest, RoundTripsEveryField) {
  WriteBatch b;
  b.machines.push_back({Make("m-000000000001", "10.250.0.2")});
  auto rev = store_->commit(b);
  ASSERT_TRUE(rev.ok()) << rev.status();
  auto got = store_->machine("m-000000000001");
  ASSERT_TRUE(got.ok()) << got.status();
  MachineRecord want = Make("m-000000000001", "10.250.0.2");
  want.revision = *rev;
  EXPECT_EQ(got->id, want.id);
  EXPECT_EQ(got->address, want.address);
  EXPECT_EQ(got->host_name, want.host_name);
  EXPECT_EQ(got->port, want.port);
  EXPECT_EQ(got->user, want.user);
  EXPECT_EQ(got->host_key, want.host_key);
  EXPECT_EQ(got->instance_type, want.instance_type);
  EXPECT_EQ(got->facts, want.facts);
  EXPECT_EQ(got->override_checks, want.override_checks);
  EXPECT_EQ(got->mismatches, want.mismatches);
  EXPECT_EQ(got->drained, want.drained);
  EXPECT_EQ(got->registered_at, want.registered_at);
  EXPECT_EQ(got->pool, want.pool);
  EXPECT_EQ(got->revision, *rev);
  auto all = store_->machines();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
}

TEST_P(MachineStoreTest, CompareAndSwap) {
  WriteBatch b;
  b.machines.push_back({Make("m-000000000001", "10.250.0.2")});
  auto rev = store_->commit(b);
  ASSERT_TRUE(rev.ok());
  // Created twice: refused.
  EXPECT_EQ(store_->commit(b).status().code(), absl::StatusCode::kFailedPrecondition);
  // Written at the revision read: ok; at an older one: refused, nothing written.
  MachineRecord r = Make("m-000000000001", "10.250.0.2");
  r.drained = true;
  WriteBatch up;
  up.machines.push_back({r, *rev});
  auto rev2 = store_->commit(up);
  ASSERT_TRUE(rev2.ok()) << rev2.status();
  r.drained = false;
  r.pool.reason = "stale";
  WriteBatch stale;
  stale.machines.push_back({r, *rev});
  EXPECT_EQ(store_->commit(stale).status().code(), absl::StatusCode::kFailedPrecondition);
  auto got = store_->machine(r.id);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->drained);
  EXPECT_EQ(got->revision, *rev2);
}

TEST_P(MachineStoreTest, OneMachinePerAddressAndPort) {
  WriteBatch b;
  b.machines.push_back({Make("m-000000000001", "10.250.0.2", 22)});
  ASSERT_TRUE(store_->commit(b).ok());
  WriteBatch same;
  same.machines.push_back({Make("m-000000000002", "10.250.0.2", 22)});
  auto s = store_->commit(same);
  ASSERT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(s.status().message()).find("m-000000000001"), std::string::npos);
  WriteBatch other_port;
  other_port.machines.push_back({Make("m-000000000002", "10.250.0.2", 2222)});
  EXPECT_TRUE(store_->commit(other_port).ok());
}

TEST_P(MachineStoreTest, EraseAndNotFound) {
  WriteBatch b;
  b.machines.push_back({Make("m-000000000001", "10.250.0.2")});
  auto rev = store_->commit(b);
  ASSERT_TRUE(rev.ok());
  WriteBatch e;
  e.machines.push_back({Make("m-000000000001", "10.250.0.2"), *rev, true});
  ASSERT_TRUE(store_->commit(e).ok());
  EXPECT_EQ(store_->machine("m-000000000001").status().code(), absl::StatusCode::kNotFound);
  // The address is free again.
  WriteBatch again;
  again.machines.push_back({Make("m-000000000003", "10.250.0.2")});
  EXPECT_TRUE(store_->commit(again).ok());
}

TEST_P(MachineStoreTest, SpareTargets) {
  WriteBatch b;
  b.spare_targets = {{"ml.g5.xlarge", 2}, {"ml.c5.large", 1}};
  ASSERT_TRUE(store_->commit(b).ok());
  WriteBatch c;
  c.spare_targets = {{"ml.c5.large", 0}, {"ml.g5.xlarge", 3}};
  ASSERT_TRUE(store_->commit(c).ok());
  auto t = store_->spareTargets();
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, (std::map<std::string, int, std::less<>>{{"ml.g5.xlarge", 3}}));
}

INSTANTIATE_TEST_SUITE_P(FileAndMemory, MachineStoreTest, ::testing::Bool());

}  // namespace
}  // namespace hf::store
