// The control plane's side of the agent protocol over real SQLite (in memory) and a real
// local bucket directory: authentication, the node-contract files, the bundle, lifecycle
// reports, log lines.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "fakes/fake_clock.h"
#include "hyperfleet/agentapi/agent_service.h"
#include "unit/agentapi/protocol_fixtures.h"

namespace hf::agentapi {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
namespace is = model::instance_status;
namespace ls = model::lifecycle_state;

class AgentServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("hf-agentapi-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "s3/my-bucket/lcs/utils");
    write("s3/my-bucket/lcs/on_create.sh", "#!/bin/bash\necho hi\n");
    write("s3/my-bucket/lcs/utils/helper.sh", "true\n");
    write("s3/my-bucket/lcs/provisioning_parameters.json",
          R"({"version": "1.0.0", "workload_manager": "slurm", "controller_group": "ctl"})");
    store_ = std::move(store::OpenSqliteStore(":memory:").value());
    bundles_ = std::make_unique<bundle::LocalBucketSource>(root_ / "s3");

    model::Cluster c;
    c.id = "abcdefabcdef";
    c.name = "demo";
    c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdefabcdef";
    c.status = model::cluster_status::kCreating;
    c.creation_time = clock_.now();
    for (auto [name, count] : {std::pair{"ctl", 1}, std::pair{"workers", 2}, std::pair{"spare", 0}}) {
      model::InstanceGroup g;
      g.name = name;
      g.instance_type = "ml.c5.xlarge";
      g.target_count = count;
      g.spec = {{"InstanceGroupName", name}, {"InstanceCount", count}};
      c.groups.push_back(g);
    }
    store::WriteBatch b;
    b.clusters.push_back({c, store::kMustNotExist, false});
    int k = 0;
    for (auto [group, id] : {std::pair{"ctl", "i-00000000000000001"},
                             std::pair{"workers", "i-00000000000000002"},
                             std::pair{"workers", "i-00000000000000003"}}) {
      model::Node n;
      n.cluster_id = c.id;
      n.instance_id = id;
      n.logical_id = std::string(group) + "-x";
      n.group = group;
      n.instance_type = "ml.c5.xlarge";
      n.launch_time = clock_.now() + std::chrono::seconds(k);
      n.private_ip = "10.224.0." + std::to_string(2 + k++);
      n.hostname = "ip-10-224-0-" + std::to_string(1 + k);
      n.lifecycle = {{"SourceS3Uri", "s3://my-bucket/lcs"}, {"OnCreate", "on_create.sh"}};
      b.nodes.push_back({n, store::kMustNotExist, false});
    }
    ASSERT_TRUE(store_->commit(b).ok());
    StartService();
  }

  /// A fresh cache and service over the same store, bundles and tokens: a restarted
  /// control plane.
  void StartService() {
    service_.reset();
    cache_ = std::make_unique<NodeStatusCache>(clock_, kDefaultHeartbeatSeconds);
    service_ = std::make_unique<AgentService>(
        *store_, *bundles_, tokens_, *cache_,
        [this](const std::string& g, const std::string& s, const std::vector<LogLine>& lines) {
          for (const auto& l : lines) logged_.push_back(g + " " + s + " " + l.message);
        },
        [this](const std::string& id) { changed_.push_back(id); }, clock_, ids_,
        AgentService::Options{});
  }
  void TearDown() override { fs::remove_all(root_); }

  void write(const std::string& rel, const std::string& text) {
    std::ofstream(root_ / rel) << text;
  }

  http::HttpResponse call(const std::string& method, const std::string& target,
                          const json& body = json::object(),
                          const std::string& id = "i-00000000000000002",
                          std::string token = "") {
    http::HttpRequest r;
    r.method = method;
    r.target = target;
    if (token.empty()) token = tokens_.tokenFor(id);
    r.headers.emplace_back("Authorization", "HyperfleetNode " + id + ":" + token);
    if (method == "POST") r.body = body.dump();
    return service_->handle(std::move(r));
  }

  fs::path root_;
  testing::FakeClock clock_;
  SequentialIdSource ids_{1};
  NodeTokens tokens_{std::string(32, 'k')};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<bundle::BundleSource> bundles_;
  std::unique_ptr<NodeStatusCache> cache_;
  std::unique_ptr<AgentService> service_;
  std::vector<std::string> logged_;
  std::vector<std::string> changed_;
};

TEST_F(AgentServiceTest, ANodeOfAGpuTypeGetsSlurmdsEmulatedGpusDropIn) {
  // gres.conf names /dev/nvidia0: without the drop-in a local node of a GPU type registers
  // INVALID_REG. A CPU type gets none.
  auto dropins = [&](const std::string& id) {
    json body = json::parse(call("POST", "/agent/v1/register", json::object(), id).body);
    std::vector<json> out;
    for (const auto& f : body["files"]) {
      if (f["path"] == "/etc/systemd/system/slurmd.service.d/hyperfleet-gpus.conf") {
        out.push_back(f);
      }
    }
    return out;
  };
  EXPECT_TRUE(dropins("i-00000000000000002").empty());
  model::Node gpu = *store_->node("abcdefabcdef", "i-00000000000000002");
  gpu.instance_id = "i-00000000000000004";
  gpu.private_ip = "10.224.0.9";
  gpu.hostname = "ip-10-224-0-9";
  gpu.instance_type = "ml.g5.12xlarge";  // 4 GPUs
  store::WriteBatch b;
  b.nodes.push_back({gpu, store::kMustNotExist, false});
  ASSERT_TRUE(store_->commit(b).ok());
  auto got = dropins(gpu.instance_id);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["mode"], 0644);
  const std::string text = got[0]["content"];
  EXPECT_NE(text.find("/dev/nvidia0 /dev/nvidia1 /dev/nvidia2 /dev/nvidia3;"),
            std::string::npos)
      << text;
}

TEST_F(AgentServiceTest, TokensAreBoundToTheirInstance) {
  NodeTokens other(std::string(32, 'o'));
  EXPECT_EQ(tokens_.tokenFor("i-1").size(), 64u);
  EXPECT_TRUE(tokens_.verify("i-1", tokens_.tokenFor("i-1")));
  EXPECT_FALSE(tokens_.verify("i-2", tokens_.tokenFor("i-1")));
  EXPECT_FALSE(tokens_.verify("i-1", other.tokenFor("i-1")));
  // A node presenting its own token for another node is refused.
  auto r = call("POST", "/agent/v1/register", {}, "i-00000000000000003",
                tokens_.tokenFor("i-00000000000000002"));
  EXPECT_EQ(r.status, 403);
  http::HttpRequest bare;
  bare.method = "POST";
  bare.target = "/agent/v1/register";
  EXPECT_EQ(service_->handle(std::move(bare)).status, 403);
  // A valid token for an instance no cluster has.
  EXPECT_EQ(call("POST", "/agent/v1/register", {}, "i-0000000000000000f").status, 403);
}

TEST_F(AgentServiceTest, RegisterHandsOutTheNodeContractAndTheLifecyclePlan) {
  auto r = call("POST", "/agent/v1/register", {{"boot_id", "b"}});
  ASSERT_EQ(r.status, 200) << r.body;
  json body = json::parse(r.body);
  EXPECT_EQ(body["cluster_name"], "demo");
  EXPECT_EQ(body["group"], "workers");
  EXPECT_EQ(body["instance_type"], "ml.c5.xlarge");
  EXPECT_FALSE(body.contains("expected_gpus"));  // no GPUs in an ml.c5.xlarge
  // A Slurm cluster (provisioning_parameters.json names a controller group): the worker's
  // scripts wait for the controller's (covered in WorkersWaitForTheController...).
  json lifecycle = body["lifecycle"];
  EXPECT_FALSE(lifecycle["run"].get<bool>());
  EXPECT_TRUE(lifecycle["wait"].get<bool>());
  std::map<std::string, json> files;
  for (const auto& f : body["files"]) {
    EXPECT_EQ(f["mode"], 0600);
    files[f["path"]] = json::parse(f["content"].get<std::string>());
  }
  ASSERT_TRUE(files.count("/opt/ml/config/resource_config.json"));
  const json& rc = files["/opt/ml/config/resource_config.json"];
  EXPECT_EQ(rc["ClusterConfig"]["ClusterName"], "demo");
  ASSERT_EQ(rc["InstanceGroups"].size(), 3u);
  const json& workers = rc["InstanceGroups"][1];
  EXPECT_EQ(workers["Name"], "workers");
  ASSERT_EQ(workers["Instances"].size(), 2u);
  EXPECT_EQ(workers["Instances"][0]["InstanceName"], "workers-1");
  EXPECT_EQ(workers["Instances"][1]["InstanceName"], "workers-2");
  EXPECT_EQ(workers["Instances"][1]["InstanceId"], "i-00000000000000003");
  EXPECT_EQ(workers["Instances"][1]["CustomerIpAddress"], "10.224.0.4");
  EXPECT_TRUE(rc["InstanceGroups"][2]["Instances"].is_null());
  ASSERT_TRUE(files.count("/opt/ml/config/provisioning_parameters.json"));
  EXPECT_EQ(files["/opt/ml/config/provisioning_parameters.json"]["controller_group"], "ctl");
  // slurm.conf goes to the controller only (workers fetch it: configless).
  bool worker_has_conf = false;
  for (const auto& f : body["files"]) worker_has_conf |= f["path"] == "/opt/slurm/etc/slurm.conf";
  EXPECT_FALSE(worker_has_conf);
  json ctl = json::parse(
      call("POST", "/agent/v1/register", json::object(), "i-00000000000000001").body);
  std::string conf;
  for (const auto& f : ctl["files"]) {
    if (f["path"] == "/opt/slurm/etc/slurm.conf") {
      conf = f["content"];
      EXPECT_EQ(f["mode"], 0644);
    }
  }
  EXPECT_NE(conf.find("SlurmctldHost=ip-10-224-0-2(10.224.0.2)"), std::string::npos) << conf;
  EXPECT_NE(conf.find("NodeName=ip-10-224-0-3 NodeHostname=ip-10-224-0-3 NodeAddr=10.224.0.3"),
            std::string::npos)
      << conf;

  // A heartbeat with the same revision gets no files; a stale one gets them again.
  json hb = json::parse(call("POST", "/agent/v1/heartbeat",
                             {{"files_revision", body["files_revision"]}}).body);
  EXPECT_FALSE(hb.contains("files"));
  EXPECT_DOUBLE_EQ(hb["time"].get<double>(), ToEpochSeconds(clock_.now()));
  hb = json::parse(call("POST", "/agent/v1/heartbeat", {{"files_revision", 1}}).body);
  EXPECT_TRUE(hb.contains("files"));
  EXPECT_EQ(cache_->lastSeen().count("i-00000000000000002"), 1u);
}

TEST_F(AgentServiceTest, AHeartbeatHoldingOldFilesGetsEveryChangeOfTheCluster) {
  // The files are kept between heartbeats (NodeFilesCache): every write to the cluster's
  // records reaches the next heartbeat of every node, the controller's slurm.conf included.
  auto files_of = [&](const std::string& id, json& revision) {
    json hb = json::parse(
        call("POST", "/agent/v1/heartbeat", {{"files_revision", revision}}, id).body);
    std::map<std::string, std::string> out;
    for (const auto& f : hb.value("files", json::array())) out[f["path"]] = f["content"];
    revision = hb["files_revision"];
    return out;
  };
  const std::string ctl = "i-00000000000000001", worker = "i-00000000000000003";
  json ctl_rev = 1, worker_rev = 1;
  ASSERT_FALSE(files_of(ctl, ctl_rev).empty());
  ASSERT_FALSE(files_of(worker, worker_rev).empty());
  EXPECT_TRUE(files_of(worker, worker_rev).empty());  // held: nothing sent
  auto write = [&](model::Node n, bool create, bool erase = false) {
    store::WriteBatch b;
    b.nodes.push_back({n, create ? store::kMustNotExist : n.revision, erase});
    ASSERT_TRUE(store_->commit(b).ok());
  };
  // A node added.
  model::Node added = *store_->node("abcdefabcdef", "i-00000000000000002");
  added.instance_id = "i-00000000000000009";
  added.private_ip = "10.224.0.9";
  added.hostname = "ip-10-224-0-9";
  write(added, true);
  auto w = files_of(worker, worker_rev);
  EXPECT_NE(w["/opt/ml/config/resource_config.json"].find("i-00000000000000009"),
            std::string::npos);
  auto c = files_of(ctl, ctl_rev);
  EXPECT_NE(c["/opt/slurm/etc/slurm.conf"].find("NodeAddr=10.224.0.9"), std::string::npos);
  // Readdressed.
  added = *store_->node("abcdefabcdef", "i-00000000000000009");
  added.private_ip = "10.224.0.19";
  write(added, false);
  c = files_of(ctl, ctl_rev);
  EXPECT_NE(c["/opt/slurm/etc/slurm.conf"].find("NodeAddr=10.224.0.19"), std::string::npos);
  EXPECT_EQ(c["/opt/slurm/etc/slurm.conf"].find("NodeAddr=10.224.0.9 "), std::string::npos);
  // Erased.
  write(*store_->node("abcdefabcdef", "i-00000000000000009"), false, true);
  w = files_of(worker, worker_rev);
  ASSERT_TRUE(w.count("/opt/ml/config/resource_config.json"));
  EXPECT_EQ(w["/opt/ml/config/resource_config.json"].find("i-00000000000000009"),
            std::string::npos);
  c = files_of(ctl, ctl_rev);
  EXPECT_EQ(c["/opt/slurm/etc/slurm.conf"].find("10.224.0.19"), std::string::npos);
  // A write that changes none of the files sends nothing.
  model::Node same = *store_->node("abcdefabcdef", worker);
  same.lifecycle_state = ls::kStarted;
  write(same, false);
  EXPECT_TRUE(files_of(worker, worker_rev).empty());
  EXPECT_TRUE(files_of(ctl, ctl_rev).empty());
}

TEST_F(AgentServiceTest, WorkersWaitForTheControllerAndASlurmConfNamingThem) {
  const std::string ctl = "i-00000000000000001", worker = "i-00000000000000002";
  auto lifecycle_of = [&](const std::string& id) {
    auto r = call("POST", "/agent/v1/register", json::object(), id);
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body)["lifecycle"];
  };
  // The worker waits, and is marked as registered-and-waiting (not "agent never started").
  json l = lifecycle_of(worker);
  EXPECT_TRUE(l["wait"].get<bool>());
  EXPECT_NE(l["wait_reason"].get<std::string>().find("controller group ctl"), std::string::npos)
      << l;
  EXPECT_GT(l["retry_ms"].get<int>(), 0);
  EXPECT_EQ(store_->node("abcdefabcdef", worker)->lifecycle_state, ls::kWaiting);
  // Said once in its lifecycle log stream.
  EXPECT_EQ(std::count_if(logged_.begin(), logged_.end(), [](const std::string& l) {
              return l.find("[SageMaker] Waiting to run the lifecycle scripts: the lifecycle "
                            "scripts of the controller group ctl") != std::string::npos;
            }), 1);
  lifecycle_of(worker);
  // The controller never waits; its registration hands it slurm.conf.
  l = lifecycle_of(ctl);
  EXPECT_TRUE(l["run"].get<bool>());
  EXPECT_FALSE(l.value("wait", false));
  // Its scripts running or failed: the worker still waits.
  ASSERT_EQ(call("POST", "/agent/v1/lifecycle", {{"state", "Started"}}, ctl).status, 200);
  EXPECT_TRUE(lifecycle_of(worker)["wait"].get<bool>());
  ASSERT_EQ(call("POST", "/agent/v1/lifecycle", {{"state", "Succeeded"}}, ctl).status, 200);
  l = lifecycle_of(worker);
  EXPECT_TRUE(l["run"].get<bool>()) << l;
  EXPECT_EQ(l["directory"], "/tmp/my-bucket/lcs/");
  EXPECT_EQ(l["on_create"], "on_create.sh");
  // Waiting -> Started is an ordinary report.
  ASSERT_EQ(call("POST", "/agent/v1/lifecycle", {{"state", "Started"}}, worker).status, 200);
  EXPECT_EQ(store_->node("abcdefabcdef", worker)->lifecycle_state, ls::kStarted);

  // A node added later waits until the controller has applied a slurm.conf naming it: the
  // controller confirms by heartbeating the revision it was given.
  model::Node added = *store_->node("abcdefabcdef", worker);
  added.instance_id = "i-00000000000000004";
  added.private_ip = "10.224.0.9";
  added.hostname = "ip-10-224-0-9";
  added.lifecycle_state.clear();
  store::WriteBatch b;
  b.nodes.push_back({added, store::kMustNotExist, false});
  ASSERT_TRUE(store_->commit(b).ok());
  l = lifecycle_of(added.instance_id);
  EXPECT_TRUE(l["wait"].get<bool>());
  EXPECT_NE(l["wait_reason"].get<std::string>().find("slurm.conf"), std::string::npos) << l;
  json hb = json::parse(call("POST", "/agent/v1/heartbeat", {{"files_revision", 1}}, ctl).body);
  ASSERT_TRUE(hb.contains("files"));  // the new file, not yet applied
  EXPECT_TRUE(lifecycle_of(added.instance_id)["wait"].get<bool>());
  hb = json::parse(
      call("POST", "/agent/v1/heartbeat", {{"files_revision", hb["files_revision"]}}, ctl).body);
  EXPECT_FALSE(hb.contains("files"));
  EXPECT_TRUE(lifecycle_of(added.instance_id)["run"].get<bool>());
}

// An agent from before the typed protocol (its messages captured in fixtures/) is served as
// before: registration, lifecycle reports and output, and the Slurm controller's heartbeat
// with its health report, Slurm view and job report; the answers carry what it reads.
TEST_F(AgentServiceTest, AVersionZeroAgentIsStillUnderstood) {
  const json& v0 = fixtures::V0Messages();
  const std::string cluster = "abcdefabcdef";
  const std::string ctl = "i-00000000000000001", worker = "i-00000000000000002";
  std::optional<SlurmJobsReport> jobs_seen;
  service_->setSlurmJobsHandler(
      [&](const std::string& id, const SlurmJobsReport* jobs)
          -> std::optional<GovernanceAnswer> {
        EXPECT_EQ(id, cluster);
        if (jobs != nullptr) jobs_seen = *jobs;
        return GovernanceAnswer{Governance{{"team-a"}, {{"high-priority", 100}}},
                                              {{12, "release"}}};
      });
  auto post = [&](const std::string& path, const char* message, const std::string& id) {
    auto r = call("POST", path, v0.at(message), id);
    EXPECT_EQ(r.status, 200) << message << ": " << r.body;
    return r.status == 200 ? json::parse(r.body) : json();
  };
  const json reg = post("/agent/v1/register", "register", ctl);
  EXPECT_TRUE(reg["lifecycle"]["run"].get<bool>()) << reg;
  EXPECT_TRUE(reg["files_revision"].is_number_integer());
  EXPECT_EQ(reg["heartbeat_seconds"], 1);
  post("/agent/v1/lifecycle", "lifecycle_started", ctl);
  post("/agent/v1/logs", "logs", ctl);
  post("/agent/v1/lifecycle", "lifecycle_succeeded", ctl);
  EXPECT_EQ(store_->node(cluster, ctl)->lifecycle_state, ls::kSucceeded);
  const std::string stream = "/aws/sagemaker/Clusters/demo/abcdefabcdef LifecycleConfig/ctl/" + ctl;
  EXPECT_NE(std::find(logged_.begin(), logged_.end(), stream + " hello"), logged_.end());
  EXPECT_NE(std::find(logged_.begin(), logged_.end(), stream + " world"), logged_.end());

  cache_->setSlurmMarks(cluster, {{"ip-10-1-0-4", "down", "Hyperfleet: test"}});
  const json hb = post("/agent/v1/heartbeat", "heartbeat_slurm_controller", ctl);
  // The members the version 0 agent reads from the answer.
  EXPECT_TRUE(hb["files"].is_array());  // revision 5 is not this cluster's
  EXPECT_TRUE(hb["files_revision"].is_number_integer());
  EXPECT_TRUE(hb["time"].is_number());
  EXPECT_EQ(hb["slurm_marks"], json::parse(R"([{"node": "ip-10-1-0-4", "action": "down",
                                               "reason": "Hyperfleet: test"}])"));
  EXPECT_EQ(hb["governance"], json::parse(R"({"accounts": ["team-a"],
                                              "qos": [{"name": "high-priority", "priority": 100}]})"));
  EXPECT_EQ(hb["slurm_job_actions"], json::parse(R"([{"job": 12, "action": "release"}])"));
  // What the service kept of the heartbeat.
  EXPECT_EQ(model::ToString(cache_->lastHealth().at(ctl).verdict), "warning");
  const auto view = cache_->clusterHealth(cluster);
  ASSERT_TRUE(view.slurm_nodes.has_value());
  ASSERT_EQ(view.slurm_nodes->size(), 2u);
  EXPECT_EQ((*view.slurm_nodes)[1].reason, "Hyperfleet: a|b");
  EXPECT_GT((*view.slurm_nodes)[1].reason_time, SystemTime{});
  ASSERT_TRUE(view.nodes.at(ctl).health.has_value());
  EXPECT_EQ(model::ToString(view.nodes.at(ctl).health->verdict), "warning");
  ASSERT_TRUE(jobs_seen.has_value());
  ASSERT_EQ(jobs_seen->jobs.size(), 2u);
  EXPECT_EQ(jobs_seen->jobs[0].mark, "hyperfleet-governed");
  EXPECT_EQ(jobs_seen->partitions.at("dev").size(), 2u);

  // A worker's heartbeat and its failure.
  post("/agent/v1/heartbeat", "heartbeat", worker);
  EXPECT_EQ(cache_->lastHealth().at(worker).findings.size(), 4u);
  post("/agent/v1/lifecycle", "lifecycle_failed", worker);
  const auto failed = store_->node(cluster, worker).value();
  EXPECT_EQ(failed.lifecycle_state, ls::kFailed);
  EXPECT_NE(failed.lifecycle_message.find("Lifecycle script on_create.sh exited with status 3"),
            std::string::npos)
      << failed.lifecycle_message;
}

// The controller-first gate reads only stored records: a restarted control plane (a fresh
// service and cache over the same store) opens it for a node that the controller's applied
// slurm.conf names, and keeps it closed for one it does not name until the controller has
// confirmed a slurm.conf that does.
TEST_F(AgentServiceTest, TheControllerFirstGateSurvivesARestart) {
  const std::string cluster = "abcdefabcdef";
  const std::string ctl = "i-00000000000000001", worker = "i-00000000000000002";
  auto lifecycle_of = [&](const std::string& id) {
    auto r = call("POST", "/agent/v1/register", json::object(), id);
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body)["lifecycle"];
  };
  EXPECT_TRUE(lifecycle_of(worker)["wait"].get<bool>());
  EXPECT_TRUE(lifecycle_of(ctl)["run"].get<bool>());  // it gets (and writes) slurm.conf
  ASSERT_EQ(call("POST", "/agent/v1/lifecycle", {{"state", "Started"}}, ctl).status, 200);
  ASSERT_EQ(call("POST", "/agent/v1/lifecycle", {{"state", "Succeeded"}}, ctl).status, 200);
  EXPECT_EQ(store_->node(cluster, ctl)->slurm_conf_nodes,
            (std::vector<std::string>{"ip-10-224-0-3", "ip-10-224-0-4"}));

  StartService();
  json l = lifecycle_of(worker);
  EXPECT_TRUE(l["run"].get<bool>()) << l;

  model::Node added = *store_->node(cluster, worker);
  added.instance_id = "i-00000000000000004";
  added.private_ip = "10.224.0.9";
  added.hostname = "ip-10-224-0-9";
  added.lifecycle_state.clear();
  store::WriteBatch b;
  b.nodes.push_back({added, store::kMustNotExist, false});
  ASSERT_TRUE(store_->commit(b).ok());
  StartService();
  l = lifecycle_of(added.instance_id);
  EXPECT_TRUE(l["wait"].get<bool>()) << l;
  EXPECT_NE(l["wait_reason"].get<std::string>().find("slurm.conf"), std::string::npos) << l;
  // The controller is sent the new slurm.conf, but has not confirmed it: still closed.
  json hb = json::parse(call("POST", "/agent/v1/heartbeat", {{"files_revision", 1}}, ctl).body);
  ASSERT_TRUE(hb.contains("files"));
  StartService();
  EXPECT_TRUE(lifecycle_of(added.instance_id)["wait"].get<bool>());
  hb = json::parse(
      call("POST", "/agent/v1/heartbeat", {{"files_revision", hb["files_revision"]}}, ctl).body);
  EXPECT_FALSE(hb.contains("files"));
  StartService();
  l = lifecycle_of(added.instance_id);
  EXPECT_TRUE(l["run"].get<bool>()) << l;
  EXPECT_EQ(store_->node(cluster, ctl)->slurm_conf_nodes,
            (std::vector<std::string>{"ip-10-224-0-3", "ip-10-224-0-4", "ip-10-224-0-9"}));
}

TEST_F(AgentServiceTest, WrongSlurmRolesAreReportedInTheLifecycleLog) {
  write("s3/my-bucket/lcs/provisioning_parameters.json",
        R"({"controller_group": "ctl", "worker_groups": [{"instance_group_name": "ghost"}]})");
  auto r = call("POST", "/agent/v1/register", json::object(), "i-00000000000000002");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(json::parse(r.body)["lifecycle"]["run"].get<bool>());  // no roles: no waiting
  bool said = false;
  for (const auto& l : logged_) said |= l.find("names instance group 'ghost'") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST_F(AgentServiceTest, HealthFaultsAndRecoveriesBecomeEventsOnce) {
  auto health = [](const std::string& verdict, const std::string& message) {
    return json{{"verdict", verdict},
                {"findings", json::array({{{"check", "slurmd"},
                                           {"severity", verdict},
                                           {"message", message}}})}};
  };
  auto events = [&] {
    std::vector<std::string> out;
    const auto page = store_->listEvents("abcdefabcdef", {}).value();
    for (const auto& e : page.items) {
      if (e.description.find("health checks") != std::string::npos) out.push_back(e.description);
    }
    return out;
  };
  const std::string id = "i-00000000000000002";
  for (const char* verdict : {"ok", "warning", "soft_fault", "soft_fault", "hard_fault", "ok"}) {
    auto r = call("POST", "/agent/v1/heartbeat",
                  {{"files_revision", 1}, {"health", health(verdict, "cannot be restarted")}}, id);
    ASSERT_EQ(r.status, 200) << r.body;
  }
  const auto seen = events();
  ASSERT_EQ(seen.size(), 3u) << ::testing::PrintToString(seen);
  EXPECT_EQ(seen[0], "Instance " + id +
                         " failed its health checks (soft fault, reboot): slurmd: cannot be "
                         "restarted");
  EXPECT_NE(seen[1].find("(hardware fault, replace)"), std::string::npos) << seen[1];
  EXPECT_EQ(seen[2], "Instance " + id + " passes its health checks again");
  EXPECT_EQ(model::ToString(cache_->lastHealth().at(id).verdict), "ok");
  // A malformed report is kept out, and changes nothing.
  ASSERT_EQ(call("POST", "/agent/v1/heartbeat", {{"health", "bad"}}, id).status, 200);
  EXPECT_EQ(events().size(), 3u);
}

// Terminated instances and deleted clusters leave nothing in the liveness maps.
TEST_F(AgentServiceTest, ForgottenInstancesAndClustersLeaveNothingBehind) {
  const json report = {{"verdict", "ok"}, {"findings", json::array()}};
  for (const char* id : {"i-00000000000000002", "i-00000000000000003"}) {
    ASSERT_EQ(call("POST", "/agent/v1/heartbeat", {{"files_revision", 1}, {"health", report}}, id)
                  .status, 200);
  }
  EXPECT_EQ(cache_->clusterHealth("abcdefabcdef").nodes.size(), 2u);
  EXPECT_EQ(cache_->trackedForTest().first, 2u);

  // Instance ...2 is terminated: its record is erased, then the controller says so.
  auto gone = store_->node("abcdefabcdef", "i-00000000000000002").value();
  store::WriteBatch b;
  b.nodes.push_back({gone, gone.revision, /*erase=*/true});
  ASSERT_TRUE(store_->commit(b).ok());
  cache_->forget("abcdefabcdef", {"i-00000000000000002"}, false);
  EXPECT_EQ(cache_->lastSeen().count("i-00000000000000002"), 0u);
  EXPECT_EQ(cache_->lastHealth().count("i-00000000000000002"), 0u);
  EXPECT_EQ(cache_->clusterHealth("abcdefabcdef").nodes.count("i-00000000000000002"), 0u);
  // A late heartbeat from it is refused and adds nothing back.
  EXPECT_EQ(call("POST", "/agent/v1/heartbeat", {{"health", report}}, "i-00000000000000002").status,
            403);
  EXPECT_EQ(cache_->trackedForTest().first, 1u);

  cache_->setSlurmMarks("abcdefabcdef", {{"ip-10-224-0-3", "down", "Hyperfleet: test"}});
  cache_->forget("abcdefabcdef", {}, /*cluster_gone=*/true);
  EXPECT_EQ(cache_->trackedForTest(), (std::pair<size_t, size_t>{0, 0}));
  EXPECT_TRUE(cache_->clusterHealth("abcdefabcdef").nodes.empty());
}

TEST_F(AgentServiceTest, BundleListingAndFilesComeFromTheLocalBucket) {
  auto r = call("GET", "/agent/v1/bundle");
  ASSERT_EQ(r.status, 200) << r.body;
  json listing = json::parse(r.body);
  std::vector<std::string> keys;
  for (const auto& f : listing["files"]) keys.push_back(f["key"]);
  EXPECT_EQ(keys, (std::vector<std::string>{"on_create.sh", "provisioning_parameters.json",
                                            "utils/helper.sh"}));
  r = call("GET", "/agent/v1/bundle/file?key=utils%2Fhelper.sh");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "true\n");
  EXPECT_EQ(call("GET", "/agent/v1/bundle/file?key=..%2F..%2Fetc%2Fpasswd").status / 100, 4);
  EXPECT_EQ(call("GET", "/agent/v1/bundle/file?key=missing.sh").status, 404);
  // An empty prefix is the agent's "empty" failure.
  fs::remove_all(root_ / "s3/my-bucket/lcs");
  r = call("GET", "/agent/v1/bundle");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_NE(r.body.find("no lifecycle scripts found"), std::string::npos) << r.body;
  EXPECT_EQ(json::parse(r.body)["reason"], "empty");
}

TEST_F(AgentServiceTest, LifecycleResultsAreRecordedOnceWithEventsAndLogMarkers) {
  ASSERT_EQ(call("POST", "/agent/v1/lifecycle", {{"state", "Started"}}).status, 200);
  ASSERT_EQ(call("POST", "/agent/v1/lifecycle", {{"state", "Started"}}).status, 200);  // retried
  ASSERT_EQ(call("POST", "/agent/v1/logs",
                 {{"stream", "LifecycleConfig"},
                  {"events", {{{"timestamp", 1}, {"message", "hello"}}}}}).status, 200);
  auto r = call("POST", "/agent/v1/lifecycle",
                {{"state", "Failed"}, {"reason", "exit"}, {"exit_code", 3},
                 {"message", "on_create.sh exited with status 3"}});
  ASSERT_EQ(r.status, 200) << r.body;
  auto node = store_->node("abcdefabcdef", "i-00000000000000002").value();
  EXPECT_EQ(node.lifecycle_state, ls::kFailed);
  EXPECT_NE(node.lifecycle_message.find("Lifecycle scripts did not run successfully: "
                                        "on_create.sh exited with status 3"),
            std::string::npos)
      << node.lifecycle_message;
  EXPECT_NE(node.lifecycle_message.find("LifecycleConfig/workers/i-00000000000000002"),
            std::string::npos);
  // Results are final: a late Succeeded does not overwrite the failure.
  ASSERT_EQ(call("POST", "/agent/v1/lifecycle", {{"state", "Succeeded"}}).status, 200);
  EXPECT_EQ(store_->node("abcdefabcdef", "i-00000000000000002").value().lifecycle_state,
            ls::kFailed);
  const std::string stream =
      "/aws/sagemaker/Clusters/demo/abcdefabcdef LifecycleConfig/workers/i-00000000000000002 ";
  ASSERT_EQ(logged_.size(), 4u);
  EXPECT_EQ(logged_[0], stream + "[SageMaker] Downloading lifecycle scripts");
  EXPECT_EQ(logged_[1], stream + "hello");
  EXPECT_EQ(logged_.back(), stream + "[SageMaker] The lifecycle scripts failed.");
  auto events = store_->listEvents("abcdefabcdef", {}).value().items;
  int lcs_events = 0;
  for (const auto& e : events) {
    if (e.description.starts_with("Instance lifecycle script execution for EC2InstanceId "
                                  "i-00000000000000002 has ")) {
      ++lcs_events;
    }
  }
  EXPECT_EQ(lcs_events, 2);
  EXPECT_EQ(changed_.size(), 2u);
  // Registration after a result does not run the scripts again.
  json reg = json::parse(call("POST", "/agent/v1/register").body);
  EXPECT_FALSE(reg["lifecycle"]["run"].get<bool>());
}

TEST_F(AgentServiceTest, AnUnusableSourceUriFailsThroughTheBundleListing) {
  auto node = store_->node("abcdefabcdef", "i-00000000000000002").value();
  node.lifecycle["SourceS3Uri"] = "s3://b/lcs";  // bucket names have at least 3 characters
  store::WriteBatch b;
  b.nodes.push_back({node, node.revision, false});
  ASSERT_TRUE(store_->commit(b).ok());
  json reg = json::parse(call("POST", "/agent/v1/register").body);
  EXPECT_TRUE(reg["lifecycle"]["run"].get<bool>());
  auto r = call("GET", "/agent/v1/bundle");
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_NE(r.body.find("SourceS3Uri"), std::string::npos) << r.body;
}

TEST_F(AgentServiceTest, BadRequestsGetClearErrors) {
  EXPECT_EQ(call("POST", "/agent/v1/lifecycle", {{"state", "Bogus"}}).status, 400);
  EXPECT_EQ(call("POST", "/agent/v1/logs", {{"events", "x"}}).status, 400);
  EXPECT_EQ(call("POST", "/agent/v1/nope").status, 404);
  http::HttpRequest r;
  r.method = "POST";
  r.target = "/agent/v1/logs";
  r.headers.emplace_back("Authorization",
                         "HyperfleetNode i-00000000000000002:" + tokens_.tokenFor("i-00000000000000002"));
  r.body = "{not json";
  EXPECT_EQ(service_->handle(std::move(r)).status, 400);
}

}  // namespace
}  // namespace hf::agentapi
