// A node's typed state through the store (src/store/node_json.cc, migration 3): a row written
// by the previous version, with the planner's bookkeeping inside "extras" and a started
// reboot's start time in RequestedAt, loads as typed values; typed values round-trip.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>

#include "hyperfleet/store/store.h"

namespace hf::store {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Request = model::NodeRecoveryRequest;

class NodeStateStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hf-node-state-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "state.db").string();
    store_ = std::move(OpenSqliteStore(path_).value());
    model::Cluster c;
    c.id = "abcdefabcdef";
    c.name = "demo";
    c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdefabcdef";
    WriteBatch b;
    b.clusters.push_back({c, kMustNotExist, false});
    ASSERT_TRUE(store_->commit(b).ok());
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }

  /// Runs `sql` on the database file with the store closed.
  void Sql(const std::string& sql) {
    store_.reset();
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    const std::string message = err ? err : "";
    sqlite3_free(err);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK) << message;
  }

  /// The stored JSON body of node `id`.
  json Body(const std::string& id) {
    store_.reset();
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(db, "SELECT body FROM nodes WHERE instance_id = ?1", -1, &s, nullptr);
    sqlite3_bind_text(s, 1, id.c_str(), -1, SQLITE_TRANSIENT);
    json body;
    if (sqlite3_step(s) == SQLITE_ROW) {
      body = json::parse(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)));
    }
    sqlite3_finalize(s);
    sqlite3_close(db);
    return body;
  }

  model::Node Load(const std::string& id) {
    if (!store_) store_ = std::move(OpenSqliteStore(path_).value());
    return store_->node("abcdefabcdef", id).value();
  }

  fs::path dir_;
  std::string path_;
  std::unique_ptr<Store> store_;
};

// Exactly the keys the previous version wrote (cluster_plan.cc and cluster_operations.cc
// before typed node state), at schema version 2.
TEST_F(NodeStateStoreTest, ARowOfThePreviousVersionLoadsAsTypedValues) {
  const json old_body = {
      {"lifecycle", {{"SourceS3Uri", "s3://b/p/"}, {"OnCreate", "on_create.sh"}}},
      {"extras",
       {{"ThreadsPerCore", 2},
        {"OverrideVpcConfig", {{"Subnets", {"subnet-0123456789abcdef0"}}}},
        {"RetryOf", "i-00000000000000008"},
        {"ReplacementOf", "i-00000000000000009"},
        {"PrivateIp", "10.1.0.5"},
        {"ReplaceAttempt", 3},
        {"SlurmDownPending", true},
        {"SlurmDownReasons", {"Hyperfleet: replacing i-00000000000000009"}}}},
      {"lcs_state", "Started"},
      {"recovery",
       {{"Action", "Reboot"},
        {"Reason", "Health check: slurmd: down"},
        {"RequestedAt", 1800000100.5},  // the planner wrote its start time over the request's
        {"Started", true},
        {"Hard", true},
        {"Source", "SoftwareFault"},
        {"BootTimeBefore", 1799990000.0},
        {"AskedAt", 1800000130.0}}},
      {"fault",
       {{"Kind", "ReplacementFailed"},
        {"Message", "on_create.sh exited with 1"},
        {"DetectedAt", 1800000000.0},
        {"RetryAt", 1800000010.0}}},
      {"recovered_at", 1800000100.5}};
  Sql("INSERT INTO nodes (cluster_id, instance_id, logical_id, group_name, instance_type, "
      "status, message, launch_time, private_ip, hostname, revision, body) VALUES "
      "('abcdefabcdef', 'i-0000000000000000a', 'workers-a', 'workers', 'ml.c5.xlarge', "
      "'Pending', 'Rebooting', 1799990000, '10.1.0.5', 'ip-10-1-0-5', 1, '" +
      old_body.dump() + "'); PRAGMA user_version = 2;");

  const model::Node n = Load("i-0000000000000000a");
  EXPECT_EQ(n.status, model::InstanceStatus::kPending);
  EXPECT_EQ(n.spec_extras, (json{{"ThreadsPerCore", 2},
                                 {"OverrideVpcConfig", {{"Subnets", {"subnet-0123456789abcdef0"}}}}}));
  EXPECT_EQ(n.marks.retry_of, "i-00000000000000008");
  EXPECT_EQ(n.marks.replacement_of, "i-00000000000000009");
  EXPECT_EQ(n.marks.requested_ip, "10.1.0.5");
  EXPECT_EQ(n.marks.replace_attempt, 3);
  EXPECT_TRUE(n.marks.slurm_down_pending);
  EXPECT_EQ(n.marks.slurm_down_reasons,
            std::vector<std::string>{"Hyperfleet: replacing i-00000000000000009"});
  ASSERT_TRUE(n.recovery);
  EXPECT_EQ(n.recovery->action, Request::Action::kReboot);
  EXPECT_EQ(n.recovery->reason, "Health check: slurmd: down");
  EXPECT_TRUE(n.recovery->hard);
  EXPECT_EQ(n.recovery->source, Request::Source::kSoftwareFault);
  EXPECT_EQ(n.recovery_progress.started_at, FromEpochSeconds(1800000100.5));
  EXPECT_EQ(n.recovery_progress.boot_time_before, FromEpochSeconds(1799990000.0));
  EXPECT_EQ(n.recovery_progress.asked_at, FromEpochSeconds(1800000130.0));
  EXPECT_FALSE(n.recovery_progress.reboot_instead);
  ASSERT_TRUE(n.fault);
  EXPECT_EQ(n.fault->kind, model::NodeFault::Kind::kReplacementFailed);
  EXPECT_EQ(n.fault->message, "on_create.sh exited with 1");
  EXPECT_EQ(n.fault->detected_at, FromEpochSeconds(1800000000.0));
  EXPECT_EQ(n.fault->retry_at, FromEpochSeconds(1800000010.0));
  EXPECT_EQ(n.lifecycle_state, "Started");
  EXPECT_EQ(n.recovered_at, FromEpochSeconds(1800000100.5));
  EXPECT_EQ(n.lifecycle["OnCreate"], "on_create.sh");

  // A request that was not started yet has no start time; one without a known action is
  // dropped (it could not be carried out).
  json waiting = old_body;
  waiting["recovery"] = {{"Action", "Replace"}, {"RequestedAt", 5.0}};
  json unknown = old_body;
  unknown["recovery"] = {{"Action", "Rebuild"}, {"RequestedAt", 5.0}, {"Started", true}};
  Sql("INSERT INTO nodes (cluster_id, instance_id, logical_id, group_name, instance_type, "
      "status, message, launch_time, private_ip, hostname, revision, body) VALUES "
      "('abcdefabcdef', 'i-0000000000000000b', 'workers-b', 'workers', 'ml.c5.xlarge', "
      "'Running', '', 1, '', '', 1, '" + waiting.dump() + "'), "
      "('abcdefabcdef', 'i-0000000000000000c', 'workers-c', 'workers', 'ml.c5.xlarge', "
      "'Running', '', 1, '', '', 1, '" + unknown.dump() + "'); PRAGMA user_version = 2;");
  const model::Node w = Load("i-0000000000000000b");
  ASSERT_TRUE(w.recovery);
  EXPECT_EQ(w.recovery->action, Request::Action::kReplace);
  EXPECT_EQ(w.recovery->requested_at, FromEpochSeconds(5.0));
  EXPECT_EQ(w.recovery_progress, model::RecoveryProgress{});
  const model::Node u = Load("i-0000000000000000c");
  EXPECT_FALSE(u.recovery);
  EXPECT_EQ(u.recovery_progress, model::RecoveryProgress{});
}

TEST_F(NodeStateStoreTest, TypedStateRoundTripsAndBookkeepingStaysOutOfExtras) {
  model::Node n;
  n.cluster_id = "abcdefabcdef";
  n.instance_id = "i-0000000000000000d";
  n.logical_id = "workers-d";
  n.group = "workers";
  n.status = model::InstanceStatus::kShuttingDown;
  n.spec_extras = {{"ThreadsPerCore", 1}};
  n.marks.replacement_of = "i-00000000000000009";
  n.marks.requested_ip = "10.1.0.9";
  n.marks.replace_attempt = 2;
  n.marks.slurm_down_reasons = {"Hyperfleet: a", "Hyperfleet: b"};
  n.recovery = Request{Request::Action::kReplace, "requested by BatchReplaceClusterNodes",
                       FromEpochSeconds(100.25), /*hard=*/true, Request::Source::kSlurmAction};
  n.recovery_progress.started_at = FromEpochSeconds(101);
  n.recovery_progress.boot_time_before = SystemTime{};
  n.recovery_progress.reboot_instead = true;
  n.fault = model::NodeFault{model::NodeFault::Kind::kUnresponsive, "silent",
                             FromEpochSeconds(99)};
  n.slurm_conf_nodes = {"ip-10-1-0-3", "ip-10-1-0-4"};
  WriteBatch b;
  b.nodes.push_back({n, kMustNotExist, false});
  ASSERT_TRUE(store_->commit(b).ok());

  const model::Node got = Load(n.instance_id);
  EXPECT_EQ(got.status, n.status);
  EXPECT_EQ(got.spec_extras, n.spec_extras);
  EXPECT_EQ(got.marks, n.marks);
  ASSERT_TRUE(got.recovery);
  EXPECT_EQ(got.recovery->action, n.recovery->action);
  EXPECT_EQ(got.recovery->reason, n.recovery->reason);
  EXPECT_EQ(got.recovery->requested_at, n.recovery->requested_at);
  EXPECT_EQ(got.recovery->hard, n.recovery->hard);
  EXPECT_EQ(got.recovery->source, n.recovery->source);
  EXPECT_EQ(got.recovery_progress, n.recovery_progress);
  ASSERT_TRUE(got.fault);
  EXPECT_EQ(got.fault->kind, n.fault->kind);
  EXPECT_EQ(got.fault->message, n.fault->message);
  EXPECT_EQ(got.fault->detected_at, n.fault->detected_at);
  EXPECT_EQ(got.slurm_conf_nodes, n.slurm_conf_nodes);

  // Stored under the keys the previous version used, the marks beside "extras".
  const json body = Body(n.instance_id);
  EXPECT_EQ(body["extras"], n.spec_extras);
  EXPECT_EQ(body["marks"]["ReplacementOf"], "i-00000000000000009");
  EXPECT_EQ(body["recovery"]["Action"], "Replace");
  EXPECT_EQ(body["recovery"]["Source"], "Requested");
  EXPECT_EQ(body["fault"]["Kind"], "Unresponsive");
  EXPECT_EQ(body["slurm_conf_nodes"], json::array({"ip-10-1-0-3", "ip-10-1-0-4"}));
}

}  // namespace
}  // namespace hf::store
