// slurm.conf rendering: roles from the API or provisioning_parameters.json, HyperPod's dialect,
// node resources from the instance catalog, partitions per worker group.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
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

/// Runs the drop-in's ExecStartPre as systemd would (`$$` is a literal `$`) with /dev/ and
/// /proc/ under `root`, and `root`/bin first in PATH (stand-ins for systemd-detect-virt and
/// modinfo); returns the shell's exit status.
int RunDropIn(const std::string& drop_in, const std::string& root) {
  const std::string key = "ExecStartPre=";
  const auto at = drop_in.find(key);
  if (at == std::string::npos) return -1;
  std::string cmd = drop_in.substr(at + key.size());
  cmd = cmd.substr(0, cmd.find('\n'));
  for (size_t p; (p = cmd.find("$$")) != std::string::npos;) cmd.replace(p, 2, "$");
  for (const std::string dir : {"/dev/", "/proc/"}) {
    for (size_t p = 0; (p = cmd.find(dir, p)) != std::string::npos; p += root.size() + 1) {
      cmd.replace(p, 1, root + "/");
    }
  }
  return std::system(absl::StrCat("PATH='", root, "/bin':\"$PATH\" ", cmd).c_str());
}

/// Writes `root`/bin/`name`, a command that exits with `status`.
void FakeCommand(const std::filesystem::path& root, const char* name, int status) {
  const auto path = root / "bin" / name;
  std::ofstream(path) << "#!/bin/sh\nexit " << status << "\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
}

TEST(SlurmConf, EmulatedGpusDropInLinksMissingDevicesOnlyWithoutTheDriver) {
  EXPECT_EQ(RenderEmulatedGpusDropIn(0), "");
  const std::string drop_in = RenderEmulatedGpusDropIn(3);
  EXPECT_NE(drop_in.find("[Service]\nExecStartPre=/bin/sh -c '"), std::string::npos) << drop_in;
  EXPECT_EQ(drop_in.find('%'), std::string::npos) << drop_in;  // a systemd specifier
  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "hf-gpus-test-XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const fs::path root = tmpl;
  const fs::path dev = root / "dev";
  for (const char* d : {"dev", "proc/driver", "bin"}) fs::create_directories(root / d);
  // A host (not a container) without NVIDIA's driver, loaded or installed.
  FakeCommand(root, "systemd-detect-virt", 1);
  FakeCommand(root, "modinfo", 1);
  auto linked = [&](const char* d) { return fs::is_symlink(dev / d); };
  auto clear = [&] {
    for (const char* d : {"nvidia0", "nvidia1", "nvidia2", "nvidiactl"}) fs::remove(dev / d);
    fs::remove(root / "proc/driver/nvidia");
  };
  // No driver: the missing devices become links to null; an existing one stays.
  std::ofstream(dev / "nvidia1") << "real";
  ASSERT_EQ(RunDropIn(drop_in, root.string()), 0);
  for (const char* d : {"nvidia0", "nvidia2"}) {
    ASSERT_TRUE(linked(d)) << d;
    EXPECT_EQ(fs::read_symlink(dev / d), dev / "null") << d;
  }
  EXPECT_FALSE(linked("nvidia1"));
  EXPECT_FALSE(fs::exists(dev / "nvidia3"));
  EXPECT_EQ(RunDropIn(drop_in, root.string()), 0);  // again at the next start: no change
  // With the driver's device files (nvidiactl): nothing is made.
  clear();
  std::ofstream(dev / "nvidiactl") << "driver";
  ASSERT_EQ(RunDropIn(drop_in, root.string()), 0);
  EXPECT_FALSE(linked("nvidia0") || fs::exists(dev / "nvidia0"));
  // The driver loaded, its device files not made yet (they appear when a program opens the
  // GPUs): no link may take their place.
  clear();
  fs::create_directories(root / "proc/driver/nvidia");
  ASSERT_EQ(RunDropIn(drop_in, root.string()), 0);
  EXPECT_FALSE(linked("nvidia0") || fs::exists(dev / "nvidia0"));
  // Installed, not loaded yet (modinfo finds the module): the same.
  clear();
  FakeCommand(root, "modinfo", 0);
  ASSERT_EQ(RunDropIn(drop_in, root.string()), 0);
  EXPECT_FALSE(linked("nvidia0") || fs::exists(dev / "nvidia0"));
  // A container (a local node) on a host with the driver sees the host's /proc/driver and
  // modules but no GPU device: emulated.
  clear();
  fs::create_directories(root / "proc/driver/nvidia");
  FakeCommand(root, "systemd-detect-virt", 0);
  ASSERT_EQ(RunDropIn(drop_in, root.string()), 0);
  for (const char* d : {"nvidia0", "nvidia1", "nvidia2"}) EXPECT_TRUE(linked(d)) << d;
  fs::remove_all(root);
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

/// Runs job_submit.lua, then `checks` (Lua that returns "" or what failed) in Lua 5.1, the
/// interpreter Debian's job_submit_lua.so links, loaded at run time (Debian ships no lua5.1
/// headers with Slurm). `harness` runs first: the stand-ins for Slurm's `slurm` table and
/// io.open. Returns nullopt when liblua5.1 is not installed; a Lua error is the result.
std::optional<std::string> RunLua(const std::string& harness, const std::string& script,
                                  const std::string& checks) {
  void* lib = ::dlopen("liblua5.1.so.0", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return std::nullopt;
  using State = void;
  auto newstate = reinterpret_cast<State* (*)()>(::dlsym(lib, "luaL_newstate"));
  auto openlibs = reinterpret_cast<void (*)(State*)>(::dlsym(lib, "luaL_openlibs"));
  auto loadbuffer = reinterpret_cast<int (*)(State*, const char*, size_t, const char*)>(
      ::dlsym(lib, "luaL_loadbuffer"));
  auto pcall = reinterpret_cast<int (*)(State*, int, int, int)>(::dlsym(lib, "lua_pcall"));
  auto tolstring =
      reinterpret_cast<const char* (*)(State*, int, size_t*)>(::dlsym(lib, "lua_tolstring"));
  auto close = reinterpret_cast<void (*)(State*)>(::dlsym(lib, "lua_close"));
  if (!newstate || !openlibs || !loadbuffer || !pcall || !tolstring || !close) {
    ::dlclose(lib);
    return "liblua5.1 lacks an entry point";
  }
  State* L = newstate();
  openlibs(L);
  std::string result;
  for (const auto* chunk : {&harness, &script, &checks}) {
    const bool last = chunk == &checks;
    if (loadbuffer(L, chunk->data(), chunk->size(), "chunk") != 0 ||
        pcall(L, 0, last ? 1 : 0, 0) != 0 || last) {
      const char* s = tolstring(L, -1, nullptr);
      result = s ? s : "(no string)";
      break;
    }
  }
  close(L);
  ::dlclose(lib);
  return result;
}

// Stand-ins for what job_submit/lua gives the script: the `slurm` table (log_user's messages
// collected in user_msgs) and the two files it reads.
constexpr char kLuaHarness[] = R"lua(
local files = {
  ["/opt/slurm/etc/hyperfleet-governed-accounts"] = "team-a\nteam-b\n",
  ["/etc/passwd"] = "root:x:0:0:root:/root:/bin/bash\n" ..
                    "slurm:x:64030:64030::/nonexistent:/usr/sbin/nologin\n" ..
                    "hfuser:x:1000:1000::/home/hfuser:/bin/sh\n",
}
io.open = function(path, mode)
  local content = files[path]
  if content == nil then return nil end
  return { lines = function(self) return string.gmatch(content, "([^\n]*)\n") end,
           close = function(self) end }
end
user_msgs = {}
slurm = { SUCCESS = 0, ERROR = -1, NO_VAL = 4294967294,
          log_user = function(fmt, ...) table.insert(user_msgs, string.format(fmt, ...)) end,
          log_info = function(fmt, ...) string.format(fmt, ...) end }
)lua";

constexpr char kLuaChecks[] = R"lua(
local NO_VAL, INFINITE, ESLURM_JOB_HELD = 4294967294, 4294967295, 2042
local failed = {}
local function expect(ok, what) if not ok then table.insert(failed, what) end end
local function submit(d)
  if d.het_job_offset == nil then d.het_job_offset = NO_VAL end
  user_msgs = {}
  return slurm_job_submit(d, {}, 1000), user_msgs[1] or ""
end
-- Held and marked: the governed accounts only; an administrator's AdminComment stays.
local d = { account = "team-a" }
local rc = submit(d)
expect(rc == 0 and d.priority == 0 and d.admin_comment == "hyperfleet-governed", "governed")
d = { account = "team-b", admin_comment = "ops" }
submit(d)
expect(d.priority == 0 and d.admin_comment == "ops", "administrator's comment")
d = { account = "team-c" }
rc = submit(d)
expect(rc == 0 and d.priority == nil and d.admin_comment == nil, "ungoverned untouched")
-- Arrays and heterogeneous jobs of governed accounts are refused, saying why.
local msg
rc, msg = submit({ account = "team-a", array_inx = "0-3" })
expect(rc == slurm.ERROR and msg == "hyperfleet: job arrays are not supported for " ..
       "governed account team-a; submit one job per task", "array: " .. msg)
rc, msg = submit({ account = "team-a", het_job_offset = 0 })
expect(rc == slurm.ERROR and string.find(msg, "heterogeneous jobs are not supported for " ..
       "governed account team-a", 1, true) ~= nil, "het 0: " .. msg)
rc = submit({ account = "team-a", het_job_offset = 1 })
expect(rc == slurm.ERROR, "het 1")
expect(submit({ account = "team-c", array_inx = "0-3" }) == 0, "ungoverned array")
expect(submit({ account = "team-c", het_job_offset = 0 }) == 0, "ungoverned het")
-- A held job with our mark: only root and SlurmUser release it or set its priority.
local function modify(priority, rec_priority, comment, uid)
  return slurm_job_modify({ priority = priority },
                          { priority = rec_priority, admin_comment = comment, job_id = 7 },
                          {}, uid)
end
for _, mark in ipairs({ "hyperfleet-governed", "hyperfleet-held" }) do
  expect(modify(INFINITE, 0, mark, 1000) == ESLURM_JOB_HELD, "user release " .. mark)
  expect(modify(5, 0, mark, 1000) == ESLURM_JOB_HELD, "user priority " .. mark)
  expect(modify(INFINITE, 0, mark, 0) == 0, "root release " .. mark)
  expect(modify(INFINITE, 0, mark, 64030) == 0, "SlurmUser release " .. mark)
  expect(modify(0, 0, mark, 1000) == 0, "user hold " .. mark)
  expect(modify(NO_VAL, 0, mark, 1000) == 0, "user's other update " .. mark)
  expect(modify(INFINITE, 1000, mark, 1000) == 0, "user release, not held " .. mark)
end
-- A released (admitted) pending job with our mark: its user may not change what it was
-- admitted as; root and SlurmUser may, and a held or running job may change.
local function update(fields, rec_priority, state, comment, uid)
  fields.priority = fields.priority or NO_VAL
  return slurm_job_modify(fields, { priority = rec_priority, job_state = state,
                                    admin_comment = comment, job_id = 8 }, {}, uid)
end
local ESLURM_ACCESS_DENIED, PENDING, RUNNING = 2002, 0, 1
for _, f in ipairs({ { min_nodes = 4 }, { max_nodes = 4 }, { partition = "big" },
                     { qos = "inference-priority" }, { account = "team-b" },
                     { tres_per_node = "gres:gpu:8" }, { tres_per_job = "gres:gpu:16" } }) do
  local name = next(f)
  local function copy() local c = {} for k, v in pairs(f) do c[k] = v end return c end
  expect(update(copy(), 1000, PENDING, "hyperfleet-held", 1000) == ESLURM_ACCESS_DENIED,
         "user changes " .. name)
  expect(update(copy(), 1000, PENDING + 256, "hyperfleet-governed", 1000) ==
         ESLURM_ACCESS_DENIED, "user changes " .. name .. " (state flags)")
  expect(update(copy(), 1000, PENDING, "hyperfleet-held", 0) == 0, "root changes " .. name)
  expect(update(copy(), 1000, PENDING, "hyperfleet-held", 64030) == 0, "SlurmUser " .. name)
  expect(update(copy(), 0, PENDING, "hyperfleet-held", 1000) == 0, "held job " .. name)
  expect(update(copy(), 1000, RUNNING, "hyperfleet-held", 1000) == 0, "running job " .. name)
  expect(update(copy(), 1000, PENDING, "hyperfleet-released", 1000) == 0, "disowned " .. name)
  expect(update(copy(), 1000, PENDING, nil, 1000) == 0, "unmarked " .. name)
end
expect(update({ min_nodes = NO_VAL, max_nodes = NO_VAL, time_limit = 60 }, 1000, PENDING,
              "hyperfleet-held", 1000) == 0, "user's other update of an admitted job")
expect(modify(INFINITE, 0, "hyperfleet-released", 1000) == 0, "disowned")
expect(modify(INFINITE, 0, nil, 1000) == 0, "no mark")
expect(modify(INFINITE, 0, "ops", 1000) == 0, "operator's comment")
return table.concat(failed, "; ")
)lua";

TEST(JobSubmitLua, RunsAsSlurmWould) {
  auto result = RunLua(kLuaHarness, RenderJobSubmitLua(), kLuaChecks);
  if (!result) GTEST_SKIP() << "liblua5.1.so.0 is not installed (slurm-wlm-basic-plugins)";
  EXPECT_EQ(*result, "");
}

}  // namespace
}  // namespace hf::slurm
