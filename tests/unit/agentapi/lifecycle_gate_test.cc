// The controller-first gate and the lifecycle plan of a registering agent
// (agentapi/lifecycle_gate.h), as tables of stored records.
#include "hyperfleet/agentapi/lifecycle_gate.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace hf::agentapi {
namespace {

namespace is = model::instance_status;
namespace ls = model::lifecycle_state;

model::Node NodeOf(const std::string& id, const std::string& group, const std::string& hostname,
                   const std::string& lifecycle_state = "") {
  model::Node n;
  n.instance_id = id;
  n.group = group;
  n.hostname = hostname;
  n.status = is::kPending;
  n.lifecycle_state = lifecycle_state;
  n.lifecycle = {{"SourceS3Uri", "s3://my-bucket/lcs"}, {"OnCreate", "on_create.sh"},
                 {"OnInitComplete", "done.sh"}};
  return n;
}

TEST(SlurmConfNodeNamesTest, TheWordAfterNodeNameAtTheStartOfALine) {
  EXPECT_EQ(SlurmConfNodeNames("ClusterName=c\n"
                               "NodeName=ip-10-0-0-3 NodeHostname=ip-10-0-0-3 CPUs=4\n"
                               "# NodeName=commented\n"
                               "PartitionName=dev Nodes=ALL\n"
                               "NodeName=ip-10-0-0-4\tCPUs=4\r\n"
                               "NodeName=last"),
            (std::vector<std::string>{"ip-10-0-0-3", "ip-10-0-0-4", "last"}));
  EXPECT_TRUE(SlurmConfNodeNames("").empty());
}

TEST(LifecycleWaitTest, WorkersWaitForASucceededControllerThatAppliedTheirName) {
  model::Node ready = NodeOf("i-c", "ctl", "ip-c", ls::kSucceeded);
  ready.slurm_conf_nodes = {"ip-w", "ip-x"};
  const model::Node worker = NodeOf("i-w", "workers", "ip-w");
  auto controller = [&](auto change) {
    model::Node c = ready;
    change(c);
    return c;
  };
  const std::string not_succeeded =
      "the lifecycle scripts of the controller group ctl have not succeeded yet (Slurm's "
      "controller starts first)";
  const std::string not_named =
      "the Slurm controller has not loaded a slurm.conf naming this node yet";
  struct Case {
    const char* name;
    model::Node node;
    std::vector<model::Node> nodes;
    std::string controller_group;
    std::optional<std::string> want;
  };
  const std::vector<Case> cases = {
      {"not a Slurm cluster", worker, {}, "", std::nullopt},
      {"the controller itself", NodeOf("i-c", "ctl", "ip-c"), {}, "ctl", std::nullopt},
      {"no controller node yet", worker, {worker}, "ctl", not_succeeded},
      {"controller running its scripts", worker,
       {controller([](auto& c) { c.lifecycle_state = ls::kStarted; })}, "ctl", not_succeeded},
      {"controller failed its scripts", worker,
       {controller([](auto& c) { c.lifecycle_state = ls::kFailed; })}, "ctl", not_succeeded},
      {"controller instance failed", worker,
       {controller([](auto& c) { c.status = is::kFailure; })}, "ctl", not_succeeded},
      {"controller shutting down", worker,
       {controller([](auto& c) { c.status = is::kShuttingDown; })}, "ctl", not_succeeded},
      {"ready and named", worker, {ready}, "ctl", std::nullopt},
      {"ready, slurm.conf not applied yet", worker,
       {controller([](auto& c) { c.slurm_conf_nodes.clear(); })}, "ctl", not_named},
      {"ready, another node's name only", worker,
       {controller([](auto& c) { c.slurm_conf_nodes = {"ip-x"}; })}, "ctl", not_named},
      {"no hostname yet", NodeOf("i-w", "workers", ""), {ready}, "ctl", not_named},
      {"a replaced controller beside the live one", worker,
       {controller([](auto& c) { c.status = is::kShuttingDown; c.slurm_conf_nodes.clear(); }),
        ready},
       "ctl", std::nullopt},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(LifecycleWait(c.node, c.nodes, c.controller_group), c.want) << c.name;
  }
}

TEST(LifecyclePlanTest, RunWaitOrNothing) {
  model::Cluster cluster;
  cluster.status = model::cluster_status::kCreating;
  model::Node ready = NodeOf("i-c", "ctl", "ip-c", ls::kSucceeded);
  ready.slurm_conf_nodes = {"ip-w"};
  const model::Node worker = NodeOf("i-w", "workers", "ip-w");

  LifecycleSpec run = LifecyclePlan(cluster, worker, {ready, worker}, "ctl", 600, 250);
  EXPECT_TRUE(run.run);
  EXPECT_FALSE(run.wait);
  EXPECT_EQ(run.source_s3_uri, "s3://my-bucket/lcs");
  EXPECT_EQ(run.on_create, "on_create.sh");
  EXPECT_EQ(run.on_init_complete, "done.sh");
  EXPECT_EQ(run.directory, "/tmp/my-bucket/lcs/");
  EXPECT_EQ(run.timeout_seconds, 600);

  LifecycleSpec wait = LifecyclePlan(cluster, worker, {worker}, "ctl", 600, 250);
  EXPECT_FALSE(wait.run);
  EXPECT_TRUE(wait.wait);
  EXPECT_EQ(wait.retry_ms, 250);
  EXPECT_NE(wait.wait_reason.find("controller group ctl"), std::string::npos);

  auto nothing = [](const LifecycleSpec& s) { return !s.run && !s.wait; };
  model::Node started = worker;  // scripts that started never wait again
  started.lifecycle_state = ls::kStarted;
  EXPECT_TRUE(LifecyclePlan(cluster, started, {started}, "ctl", 600, 250).run);
  for (const char* result : {ls::kSucceeded, ls::kFailed}) {
    model::Node done = worker;
    done.lifecycle_state = result;
    EXPECT_TRUE(nothing(LifecyclePlan(cluster, done, {ready}, "ctl", 600, 250))) << result;
  }
  model::Node leaving = worker;
  leaving.status = is::kShuttingDown;
  EXPECT_TRUE(nothing(LifecyclePlan(cluster, leaving, {ready}, "ctl", 600, 250)));
  model::Node bare = worker;
  bare.lifecycle = nullptr;
  EXPECT_TRUE(nothing(LifecyclePlan(cluster, bare, {ready}, "ctl", 600, 250)));
  model::Cluster failed = cluster;  // its controller will not come: nothing waits
  failed.status = model::cluster_status::kFailed;
  EXPECT_TRUE(nothing(LifecyclePlan(failed, worker, {worker}, "ctl", 600, 250)));
  model::Node bad_uri = worker;  // runs: the listing then fails with the reason
  bad_uri.lifecycle["SourceS3Uri"] = "s3://b/lcs";
  EXPECT_EQ(LifecyclePlan(cluster, bad_uri, {ready}, "ctl", 600, 250).directory,
            "/tmp/lifecycle-scripts/");
}

}  // namespace
}  // namespace hf::agentapi
