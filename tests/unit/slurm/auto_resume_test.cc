// srun --auto-resume's pure parts: fault diagnosis from sinfo/scontrol text, the
// configuration check and the argument handling (include/hyperfleet/slurm/auto_resume.h).
#include "hyperfleet/slurm/auto_resume.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

namespace hf::slurm {
namespace {

TEST(AutoResume, ParsesSinfoNodesOncePerNodeAndKeepsBarsInTheReason) {
  const auto nodes = ParseSinfoNodes(
      "ip-10-1-0-7|down|Hyperfleet: node dead|no heartbeat\n"
      "ip-10-1-0-7|down|Hyperfleet: node dead|no heartbeat\n"  // second partition
      "ip-10-1-0-8|allocated|none\n"
      "garbage line\n"
      "\n");
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].name, "ip-10-1-0-7");
  EXPECT_EQ(nodes[0].state, "down");
  EXPECT_EQ(nodes[0].reason, "Hyperfleet: node dead|no heartbeat");
  EXPECT_EQ(nodes[1].name, "ip-10-1-0-8");
  EXPECT_EQ(nodes[1].reason, "none");
}

TEST(AutoResume, FaultReasonsFollowTheContractExactly) {
  EXPECT_TRUE(IsFaultReason("Hyperfleet: hung (no heartbeat for 15 s)"));
  EXPECT_TRUE(IsFaultReason("Action:Replace"));
  EXPECT_TRUE(IsFaultReason("Action:Reboot"));
  // Case-sensitive and exact, as on HyperPod.
  EXPECT_FALSE(IsFaultReason("action:replace"));
  EXPECT_FALSE(IsFaultReason("Action:Replace please"));
  EXPECT_FALSE(IsFaultReason("hyperfleet: lower case"));
  EXPECT_FALSE(IsFaultReason("Not responding"));
  EXPECT_FALSE(IsFaultReason("none"));
}

TEST(AutoResume, AFaultNeedsAnUnavailableStateAndAFaultReason) {
  EXPECT_EQ(FaultOf({"ip-1", "down", "Hyperfleet: test"}).value_or(""),
            "ip-1 is down (reason \"Hyperfleet: test\")");
  for (const char* state : {"down*", "fail", "failing", "drained", "draining", "drain", "DOWN",
                            "drained~"}) {
    EXPECT_TRUE(FaultOf({"ip-1", state, "Action:Replace"}).has_value()) << state;
  }
  // Healthy states, whatever the reason text says.
  for (const char* state : {"idle", "allocated", "mixed", "completing", "idle*"}) {
    EXPECT_FALSE(FaultOf({"ip-1", state, "Hyperfleet: test"}).has_value()) << state;
  }
  // Slurm's own verdict without Hyperfleet's diagnosis, or an admin's drain, is no fault.
  EXPECT_FALSE(FaultOf({"ip-1", "down*", "Not responding"}).has_value());
  EXPECT_FALSE(FaultOf({"ip-1", "drained", "maintenance"}).has_value());
}

TEST(AutoResume, FaultsListsOnlyTheFaultyNodesInOrder) {
  const auto faults = Faults(ParseSinfoNodes("ip-a|idle|none\n"
                                             "ip-b|fail|Action:Reboot\n"
                                             "ip-c|down*|Not responding\n"
                                             "ip-d|down|Hyperfleet: slurmd dead\n"));
  ASSERT_EQ(faults.size(), 2u);
  EXPECT_EQ(faults[0], "ip-b is fail (reason \"Action:Reboot\")");
  EXPECT_EQ(faults[1], "ip-d is down (reason \"Hyperfleet: slurmd dead\")");
  EXPECT_TRUE(Faults({}).empty());
}

TEST(AutoResume, ReadsTheConfigAndChecksTheTaskPlugin) {
  const std::string config =
      "Configuration data as of 2024-01-01T00:00:00\n"
      "TaskPlugin              = task/cgroup,task/affinity\n"
      "TaskPluginParam         = (null type)\n";
  EXPECT_EQ(ConfigValue(config, "TaskPlugin").value_or("?"), "task/cgroup,task/affinity");
  EXPECT_FALSE(ConfigValue(config, "Task").has_value());
  EXPECT_EQ(TaskPluginError("task/none"), "");
  EXPECT_EQ(TaskPluginError(" task/none\n"), "");
  EXPECT_EQ(TaskPluginError("task/cgroup,task/affinity"),
            "Configuration error: slurm.conf has TaskPlugin=task/cgroup,task/affinity; "
            "srun --auto-resume supports only TaskPlugin=task/none");
  EXPECT_NE(TaskPluginError(""), "");
}

TEST(AutoResume, ReadsJobFields) {
  const std::string job =
      "JobId=42 JobName=train UserId=root(0) JobState=RUNNING Reason=None Requeue=1 "
      "Restarts=0 BatchFlag=1 NodeList=ip-10-1-0-[7-8] BatchHost=ip-10-1-0-7";
  EXPECT_EQ(JobField(job, "NodeList").value_or(""), "ip-10-1-0-[7-8]");
  EXPECT_EQ(JobField(job, "JobState").value_or(""), "RUNNING");
  EXPECT_EQ(JobField(job, "Requeue").value_or(""), "1");
  EXPECT_FALSE(JobField(job, "Node").has_value());
  EXPECT_EQ(JobField("   JobId=1\n   NodeList=ip-1\n", "NodeList").value_or(""), "ip-1");
}

TEST(AutoResume, OptionValueIsOneOrZero) {
  EXPECT_EQ(ParseAutoResumeValue("1"), std::optional<bool>(true));
  EXPECT_EQ(ParseAutoResumeValue("0"), std::optional<bool>(false));
  EXPECT_FALSE(ParseAutoResumeValue("yes").has_value());
  EXPECT_FALSE(ParseAutoResumeValue("").has_value());
  EXPECT_FALSE(ParseAutoResumeValue("10").has_value());
}

TEST(AutoResume, JoinsHostlistsForSinfo) {
  EXPECT_EQ(JoinHostlists({"ip-1,ip-[2-3]", "ip-1,ip-[2-3]", "", "(null)"}), "ip-1,ip-[2-3]");
  EXPECT_EQ(JoinHostlists({"ip-[1-2]", "ip-1"}), "ip-[1-2],ip-1");
  EXPECT_EQ(JoinHostlists({}), "");
}

}  // namespace
}  // namespace hf::slurm
