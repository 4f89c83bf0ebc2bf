// slurm.conf rendering: roles from the API or provisioning_parameters.json, HyperPod's dialect,
// node resources from the instance catalog, partitions per worker group.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "hyperfleet/slurm/slurm_config.h"

namespace hf::slurm {
namespace {

using nlohmann::json;

model::InstanceGroup Group(const std::string& name, const std::string& type, int count,
                           json slurm_config = nullptr) {
  model::InstanceGroup g;
  g.name = name;
  g.instance_type = type;
  g.target_count = count;
  g.spec = {{"InstanceGroupName", name}, {"InstanceType", type}, {"InstanceCount", count}};
  if (!slurm_config.is_null()) g.spec["SlurmConfig"] = slurm_config;
  return g;
}

model::Node Node(const std::string& group, const std::string& ip, int order,
                 const std::string& type = "") {
  model::Node n;
  n.instance_type = type;
  n.instance_id = "i-0000000000000000" + std::to_string(order);
  n.group = group;
  n.status = model::instance_status::kRunning;
  n.private_ip = ip;
  std::string host = "ip-" + ip;
  std::replace(host.begin(), host.end(), '.', '-');
  n.hostname = host;
  n.launch_time = FromEpochSeconds(1'800'000'000 + order);
  return n;
}

model::Cluster Cluster(std::vector<model::InstanceGroup> groups) {
  model::Cluster c;
  c.id = "abcdefabcdef";
  c.name = "ml-cluster";
  c.groups = std::move(groups);
  return c;
}

const json kParams = {{"version", "1.0.0"},
                      {"workload_manager", "slurm"},
                      {"controller_group", "controller-machine"},
                      {"login_group", "login-group"},
                      {"worker_groups",
                       {{{"instance_group_name", "worker-group-1"},
                         {"partition_name", "ml.g5.8xlarge"}}}}};

TEST(SlurmRoles, FromProvisioningParameters) {
  auto c = Cluster({Group("controller-machine", "ml.c5.xlarge", 1),
                    Group("login-group", "ml.m5.xlarge", 1),
                    Group("worker-group-1", "ml.g5.8xlarge", 2),
                    Group("worker-group-2", "ml.c5.4xlarge", 1)});
  auto roles = SlurmRolesOf(c, kParams);
  ASSERT_TRUE(roles.ok()) << roles.status();
  EXPECT_EQ(roles->controller_group, "controller-machine");
  EXPECT_EQ(roles->login_group, "login-group");
  EXPECT_EQ(roles->worker_partitions,
            (std::map<std::string, std::string>{{"worker-group-1", "ml.g5.8xlarge"},
                                                {"worker-group-2", "ml.c5.4xlarge"}}));
}

TEST(SlurmRoles, TheApisSlurmConfigWins) {
  auto c = Cluster({Group("head", "ml.c5.xlarge", 1, {{"NodeType", "Controller"}}),
                    Group("gpu", "ml.g5.8xlarge", 2,
                          {{"NodeType", "Compute"}, {"PartitionNames", {"training"}}})});
  auto roles = SlurmRolesOf(c, kParams);  // names groups this cluster lacks: ignored
  ASSERT_TRUE(roles.ok()) << roles.status();
  EXPECT_EQ(roles->controller_group, "head");
  EXPECT_EQ(roles->worker_partitions.at("gpu"), "training");
}

TEST(SlurmRoles, ClearErrors) {
  auto c = Cluster({Group("a", "ml.c5.xlarge", 1), Group("b", "ml.c5.xlarge", 1)});
  auto none = SlurmRolesOf(c, json());
  EXPECT_TRUE(absl::IsInvalidArgument(none.status()));
  EXPECT_NE(std::string(none.status().message()).find("controller"), std::string::npos);
  auto unknown = SlurmRolesOf(c, json{{"controller_group", "nope"}});
  EXPECT_NE(std::string(unknown.status().message()).find("'nope'"), std::string::npos);
  auto two = SlurmRolesOf(Cluster({Group("a", "ml.c5.xlarge", 1, {{"NodeType", "Controller"}}),
                                   Group("b", "ml.c5.xlarge", 1, {{"NodeType", "Controller"}})}),
                          json());
  EXPECT_NE(std::string(two.status().message()).find("more than one Controller"),
            std::string::npos);
}

TEST(SlurmConf, HyperPodDialectWithResourcesFromTheCatalog) {
  auto c = Cluster({Group("controller-machine", "ml.c5.xlarge", 1),
                    Group("login-group", "ml.m5.xlarge", 1),
                    Group("worker-group-1", "ml.g5.8xlarge", 2)});
  std::vector<model::Node> nodes = {Node("controller-machine", "10.1.0.5", 1),
                                    Node("login-group", "10.1.0.6", 2),
                                    Node("worker-group-1", "10.1.0.8", 4),
                                    Node("worker-group-1", "10.1.0.7", 3)};
  auto gone = Node("worker-group-1", "10.1.0.9", 5);
  gone.status = model::instance_status::kShuttingDown;
  nodes.push_back(gone);
  auto roles = SlurmRolesOf(c, kParams).value();
  auto conf = RenderSlurmConf(c, nodes, roles, model::InstanceCatalog::Embedded());
  ASSERT_TRUE(conf.ok()) << conf.status();
  const std::string& s = *conf;
  for (const char* line : {
           "ClusterName=ml-cluster\n",
           "SlurmctldHost=ip-10-1-0-5(10.1.0.5)\n",
           "SlurmctldParameters=enable_configless\n",
           "JobSubmitPlugins=lua\n",
           "SlurmdParameters=config_overrides\n",
           "TaskPlugin=task/none\n",
           "AuthInfo=cred_expire=5\n",
           "SchedulerParameters=batch_sched_delay=0,sched_interval=2\n",
           "GresTypes=gpu\n",
           "Include accounting.conf\n",
           "NodeName=ip-10-1-0-6 NodeHostname=ip-10-1-0-6 NodeAddr=10.1.0.6 CPUs=4 "
           "RealMemory=16384 State=UNKNOWN\n",
           "NodeName=ip-10-1-0-7 NodeHostname=ip-10-1-0-7 NodeAddr=10.1.0.7 CPUs=32 "
           "RealMemory=131072 Gres=gpu:1 State=UNKNOWN\n",
           "PartitionName=dev Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
           "PartitionName=ml.g5.8xlarge Nodes=ip-10-1-0-7,ip-10-1-0-8 MaxTime=INFINITE "
           "State=UP\n"}) {
    EXPECT_NE(s.find(line), std::string::npos) << "missing: " << line << "\nin:\n" << s;
  }
  // The controller runs slurmctld, not slurmd; nodes going away are gone from Slurm.
  EXPECT_EQ(s.find("NodeName=ip-10-1-0-5"), std::string::npos);
  EXPECT_EQ(s.find("10.1.0.9"), std::string::npos);
  // Workers keep their launch order in the partition list.
  EXPECT_LT(s.find("NodeName=ip-10-1-0-7"), s.find("NodeName=ip-10-1-0-8"));
}

TEST(SlurmConf, WithoutWorkersEveryPartitionStillExistsEmpty) {
  // A worker group scaled to 0: slurmctld must still find partitions (it exits without).
  auto c = Cluster({Group("controller-machine", "ml.c5.xlarge", 1),
                    Group("worker-group-1", "ml.c5.4xlarge", 0)});
  json params = {{"controller_group", "controller-machine"},
                 {"worker_groups", {{{"instance_group_name", "worker-group-1"},
                                     {"partition_name", "train"}}}}};
  auto roles = SlurmRolesOf(c, params).value();
  auto conf = RenderSlurmConf(c, {Node("controller-machine", "10.1.0.5", 1)}, roles,
                              model::InstanceCatalog::Embedded());
  ASSERT_TRUE(conf.ok()) << conf.status();
  EXPECT_NE(conf->find("\nPartitionName=dev Default=YES MaxTime=INFINITE State=UP\n"),
            std::string::npos) << *conf;
  EXPECT_NE(conf->find("\nPartitionName=train MaxTime=INFINITE State=UP\n"), std::string::npos)
      << *conf;
  // Slurm 22.05 refuses a configuration without nodes: one FUTURE placeholder.
  EXPECT_NE(conf->find("\nNodeName=hyperfleet-placeholder State=FUTURE CPUs=1\n"),
            std::string::npos) << *conf;
}

TEST(SlurmRoles, AGroupHasOneRole) {
  auto c = Cluster({Group("controller-machine", "ml.c5.xlarge", 1),
                    Group("worker-group-1", "ml.c5.4xlarge", 1)});
  json params = {{"controller_group", "controller-machine"},
                 {"worker_groups", {{{"instance_group_name", "controller-machine"}},
                                    {{"instance_group_name", "worker-group-1"}}}}};
  auto roles = SlurmRolesOf(c, params);
  ASSERT_FALSE(roles.ok());
  EXPECT_NE(std::string(roles.status().message()).find("cannot also be a worker group"),
            std::string::npos)
      << roles.status();
}

TEST(SlurmConf, GresConfCountsEachGpuNode) {
  auto c = Cluster({Group("controller-machine", "ml.c5.xlarge", 1),
                    Group("login-group", "ml.m5.xlarge", 1),
                    Group("worker-group-1", "ml.p5.48xlarge", 1)});
  std::vector<model::Node> nodes = {Node("controller-machine", "10.1.0.5", 1),
                                    Node("login-group", "10.1.0.6", 2),
                                    Node("worker-group-1", "10.1.0.7", 3)};
  auto roles = SlurmRolesOf(c, kParams).value();
  auto gres = RenderGresConf(c, nodes, roles, model::InstanceCatalog::Embedded());
  ASSERT_TRUE(gres.ok()) << gres.status();
  // File= always: 22.05's slurmd reports 0 of a file-less GPU, and the node is drained.
  EXPECT_NE(gres->find("NodeName=ip-10-1-0-7 Name=gpu File=/dev/nvidia[0-7]\n"),
            std::string::npos)
      << *gres;
  EXPECT_EQ(gres->find("Count="), std::string::npos) << *gres;
  EXPECT_EQ(gres->find("ip-10-1-0-6"), std::string::npos) << *gres;  // no GPU
  auto conf = RenderSlurmConf(c, nodes, roles, model::InstanceCatalog::Embedded());
  ASSERT_TRUE(conf.ok());
  EXPECT_NE(conf->find(" Gres=gpu:8 "), std::string::npos) << *conf;
  // One GPU: a single file, no range.
  auto one = Cluster({Group("controller-machine", "ml.c5.xlarge", 1),
                      Group("login-group", "ml.m5.xlarge", 1),
                      Group("worker-group-1", "ml.g5.8xlarge", 1)});
  gres = RenderGresConf(one, nodes, roles, model::InstanceCatalog::Embedded());
  ASSERT_TRUE(gres.ok()) << gres.status();
  EXPECT_NE(gres->find("NodeName=ip-10-1-0-7 Name=gpu File=/dev/nvidia0\n"), std::string::npos)
      << *gres;
}

/// Runs the drop-in's ExecStartPre as systemd would (`$$` is a literal `$`) with /dev/
/// replaced by `dev`; returns the shell's exit status.
int RunDropIn(const std::string& drop_in, const std::string& dev) {
  const std::string key = "ExecStartPre=";
  const auto at = drop_in.find(key);
  if (at == std::string::npos) return -1;
  std::string cmd = drop_in.substr(at + key.size());
  cmd = cmd.substr(0, cmd.find('\n'));
  for (size_t p; (p = cmd.find("$$")) != std::string::npos;) cmd.replace(p, 2, "$");
  for (size_t p = 0; (p = cmd.find("/dev/", p)) != std::string::npos; p += dev.size() + 1) {
    cmd.replace(p, 5, dev + "/");
  }
  return std::system(cmd.c_str());
}

TEST(SlurmConf, EmulatedGpusDropInLinksMissingDevicesOnlyWithoutTheDriver) {
  EXPECT_EQ(RenderEmulatedGpusDropIn(0), "");
  const std::string drop_in = RenderEmulatedGpusDropIn(3);
  EXPECT_NE(drop_in.find("[Service]\nExecStartPre=/bin/sh -c '"), std::string::npos) << drop_in;
  EXPECT_EQ(drop_in.find('%'), std::string::npos) << drop_in;  // a systemd specifier
  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "hf-gpus-test-XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const fs::path dev = tmpl;
  // No driver: the missing devices become links to null; an existing one stays.
  std::ofstream(dev / "nvidia1") << "real";
  ASSERT_EQ(RunDropIn(drop_in, dev.string()), 0);
  for (const char* d : {"nvidia0", "nvidia2"}) {
    ASSERT_TRUE(fs::is_symlink(dev / d)) << d;
    EXPECT_EQ(fs::read_symlink(dev / d), dev / "null") << d;
  }
  EXPECT_FALSE(fs::is_symlink(dev / "nvidia1"));
  EXPECT_FALSE(fs::exists(dev / "nvidia3"));
  EXPECT_EQ(RunDropIn(drop_in, dev.string()), 0);  // again at the next start: no change
  // With the driver (nvidiactl): nothing is made.
  for (const char* d : {"nvidia0", "nvidia1", "nvidia2"}) fs::remove(dev / d);
  std::ofstream(dev / "nvidiactl") << "driver";
  ASSERT_EQ(RunDropIn(drop_in, dev.string()), 0);
  EXPECT_FALSE(fs::exists(dev / "nvidia0") || fs::is_symlink(dev / "nvidia0"));
  fs::remove_all(dev);
}

TEST(SlurmConf, NoControllerAddressYetAndUnknownTypes) {
  auto c = Cluster({Group("controller-machine", "ml.c5.xlarge", 1),
                    Group("worker-group-1", "ml.c5.4xlarge", 1)});
  auto roles = SlurmRolesOf(c, kParams);
  ASSERT_FALSE(roles.ok());  // kParams names a login group this cluster lacks
  roles = SlurmRolesOf(c, json{{"controller_group", "controller-machine"}});
  ASSERT_TRUE(roles.ok()) << roles.status();
  auto pending = Node("controller-machine", "", 1);
  EXPECT_TRUE(absl::IsFailedPrecondition(
      RenderSlurmConf(c, {pending}, *roles, model::InstanceCatalog::Embedded()).status()));
  auto cpu_only = RenderSlurmConf(c, {Node("controller-machine", "10.1.0.5", 1)}, *roles,
                                  model::InstanceCatalog::Embedded());
  ASSERT_TRUE(cpu_only.ok());
  EXPECT_EQ(cpu_only->find("GresTypes"), std::string::npos);
  EXPECT_NE(cpu_only->find("No login or worker node yet"), std::string::npos);
  // The node's own instance type counts (groups with InstanceRequirements have several).
  auto own = RenderSlurmConf(c, {Node("controller-machine", "10.1.0.5", 1),
                                 Node("worker-group-1", "10.1.0.6", 2, "ml.c5.xlarge")},
                             *roles, model::InstanceCatalog::Embedded());
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_NE(own->find("NodeAddr=10.1.0.6 CPUs=4 RealMemory=8192"), std::string::npos) << *own;
  c.groups[1].instance_type = "ml.unknown.type";
  auto bad = RenderSlurmConf(c, {Node("controller-machine", "10.1.0.5", 1),
                                 Node("worker-group-1", "10.1.0.6", 2)},
                             *roles, model::InstanceCatalog::Embedded());
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
}

TEST(JobSubmitLua, HoldsGovernedAccountsOnly) {
  const std::string lua = RenderJobSubmitLua();
  // The entry points Slurm 22.05's job_submit/lua calls, and the list the agent writes.
  EXPECT_NE(lua.find("function slurm_job_submit(job_desc, part_list, submit_uid)"),
            std::string::npos);
  EXPECT_NE(lua.find("function slurm_job_modify("), std::string::npos);
  EXPECT_NE(lua.find("\"/opt/slurm/etc/hyperfleet-governed-accounts\""), std::string::npos);
  EXPECT_NE(lua.find("job_desc.priority = 0"), std::string::npos);
  // The mark the governance loop and the agent know as Hyperfleet's (Mark::kGoverned).
  EXPECT_NE(lua.find("job_desc.admin_comment = \"hyperfleet-governed\""), std::string::npos);
  EXPECT_NE(lua.find("return slurm.SUCCESS\n"), std::string::npos);
}

}  // namespace
}  // namespace hf::slurm
