// The node agent against a fake control plane (real HTTP on loopback, real processes),
// with --root in a temp dir so that no root privileges are needed.
#include "hyperfleet/agent/agent.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "unit/agent/fake_control_plane.h"
#include "unit/agentapi/protocol_fixtures.h"

namespace hf::agent {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::FakeControlPlane;
using namespace std::chrono_literals;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

unsigned ModeOf(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

bool Contains(const std::vector<std::string>& lines, const std::string& line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hf-agent-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    ASSERT_TRUE(cp_.Start());
  }
  void TearDown() override {
    if (agent_) agent_->Stop();
    if (done_.valid()) done_.wait();
    cp_.Stop();
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  AgentOptions Options() {
    AgentOptions o;
    o.url = cp_.url();
    o.instance_id = FakeControlPlane::kInstanceId;
    o.token = FakeControlPlane::kToken;
    o.root = root_;
    o.once = true;
    o.boot_id = "test-boot";
    o.backoff_initial = 20ms;
    o.backoff_max = 200ms;
    o.kill_grace = 500ms;
    o.request_timeout_seconds = 5;
    return o;
  }

  void StartAgent(AgentOptions options) {
    agent_ = std::make_unique<Agent>(std::move(options));
    done_ = std::async(std::launch::async, [this] { return agent_->Run(); });
  }

  // Runs the agent with `once` until it returns.
  Status RunAgent(AgentOptions options) {
    StartAgent(std::move(options));
    if (done_.wait_for(60s) != std::future_status::ready) {
      agent_->Stop();
      return absl::DeadlineExceededError("agent did not finish");
    }
    return done_.get();
  }

  Status RunAgent() { return RunAgent(Options()); }

  // Registration hands out slurm.conf with node a; every heartbeat answers with revision 7,
  // which adds node b (a restart for Slurm).
  void ServeAddedSlurmNode() {
    cp_.registration["heartbeat_seconds"] = 1;
    cp_.registration["lifecycle"]["run"] = false;
    cp_.registration["files"] = json::array(
        {{{"path", "/opt/slurm/etc/slurm.conf"}, {"mode", 0644}, {"content", "NodeName=a\n"}}});
    cp_.heartbeat_response = {
        {"files_revision", 7},
        {"files", json::array({{{"path", "/opt/slurm/etc/slurm.conf"},
                                {"mode", 0644},
                                {"content", "NodeName=a\nNodeName=b\n"}}})}};
  }

  std::string BundleDir() { return root_ + "/tmp/bucket/prefix"; }

  json LastReport() {
    std::lock_guard<std::mutex> lock(cp_.mu());
    return cp_.reports.empty() ? json() : cp_.reports.back();
  }

  std::string root_;
  FakeControlPlane cp_;
  std::unique_ptr<Agent> agent_;
  std::future<Status> done_;
};

TEST(SlurmNodeView, ParsesSinfoKeepingReasonsExactlyAndOneLinePerNode) {
  const auto nodes = ParseSinfoNodes(
      "ip-10-1-0-3|idle|Unknown|0/16/0/16|none\n"
      "ip-10-1-0-3|idle|Unknown|0/16/0/16|none\n"  // the same node in a second partition
      "ip-10-1-0-4|FAIL|2026-11-30T10:00:00|4/12/0/16|Action:Replace \n"
      "ip-10-1-0-5|down*|2026-11-30T10:00:01|0/0/16/16|Hyperfleet: a|b\n"
      "garbage\n");
  ASSERT_EQ(nodes.size(), 3u) << json(nodes).dump();
  EXPECT_EQ(nodes[0].reason, "");
  EXPECT_EQ(nodes[0].reason_time, 0.0);
  EXPECT_EQ(nodes[1].state, "fail");
  EXPECT_EQ(nodes[1].alloc_cpus, 4);
  EXPECT_EQ(nodes[1].reason, "Action:Replace ");  // not the exact request: not acted on
  EXPECT_GT(nodes[1].reason_time, 0.0);
  EXPECT_EQ(nodes[2].reason, "Hyperfleet: a|b");
}

TEST(SlurmNodeView, MarkCommandsApplyOnlyWhatIsStillNeeded) {
  const auto nodes = ParseSinfoNodes(
      "ip-a|idle|Unknown|0/4/0/4|none\n"
      "ip-b|down|2026-11-30T10:00:00|0/0/4/4|Hyperfleet: replacing\n"
      "ip-c|down|2026-11-30T10:00:00|0/0/4/4|someone else's\n"
      "ip-d|fail|2026-11-30T10:00:00|0/0/4/4|Action:Replace\n");
  const std::vector<agentapi::SlurmMark> marks = {
      {"ip-a", "down", "Hyperfleet: it's dead"},
      {"ip-b", "resume", "Hyperfleet: replacing"},
      {"ip-c", "resume", "Hyperfleet: replacing"},
      {"ip-d", "down", "Hyperfleet: x"},
      {"ip-zz", "down", "Hyperfleet: unknown node"},
      {"ip-a; reboot", "down", "Hyperfleet: bad name"}};
  EXPECT_EQ(SlurmMarkCommands(marks, nodes),
            "scontrol update nodename=ip-a state=down reason='Hyperfleet: it'\\''s dead'\n"
            "scontrol update nodename=ip-b state=resume\n");
}

TEST_F(AgentTest, SuccessWritesFilesDownloadsBundleRunsScriptAndStreamsOutput) {
  cp_.registration["files"] = json::array({
      {{"path", "/opt/ml/config/resource_config.json"}, {"mode", 0600}, {"content", "{\"a\":1}"}},
      {{"path", "/opt/ml/config/host_agent.json"}, {"mode", "0640"}, {"content", "{}"}},
  });
  const std::string long_line(40000, 'x');
  cp_.bundle["on_create.sh"] =
      "#!/bin/bash\n"
      "set -e\n"
      "echo \"cwd=$(pwd)\"\n"
      "echo \"env=$(env | cut -d= -f1 | sort | tr '\\n' ' ')\"\n"
      "echo \"PATH=$PATH\"\n"
      "echo \"HOME=$HOME\"\n"
      "echo \"LANG=$LANG\"\n"
      "echo \"SAGEMAKER_RESOURCE_CONFIG_PATH=$SAGEMAKER_RESOURCE_CONFIG_PATH\"\n"
      "echo \"stdin=$(readlink /proc/$$/fd/0)\"\n"
      "echo \"sockets=$(find /proc/$$/fd -lname 'socket:*' | wc -l)\"\n"
      "pgid=$(cut -d' ' -f5 /proc/$$/stat)\n"
      "[ \"$pgid\" = \"$$\" ] && echo own-process-group\n"
      "echo \"to stderr\" >&2\n"
      "bash ./utils/helper.sh\n"
      "cat provisioning_parameters.json; echo\n"
      "for i in $(seq 1 300); do echo \"line $i\"; done\n"
      "printf '" + long_line + "\\n'\n"
      "printf 'no newline at the end'\n";
  cp_.bundle["utils/helper.sh"] = "#!/bin/sh\necho helper ran in $(pwd)\n";
  cp_.bundle["provisioning_parameters.json"] = "{\"controller_group\":\"ctl\"}";
  ASSERT_TRUE(RunAgent().ok());

  // Node files, with their modes.
  EXPECT_EQ(ReadFile(root_ + "/opt/ml/config/resource_config.json"), "{\"a\":1}");
  EXPECT_EQ(ModeOf(root_ + "/opt/ml/config/resource_config.json"), 0600u);
  EXPECT_EQ(ModeOf(root_ + "/opt/ml/config/host_agent.json"), 0640u);
  EXPECT_TRUE(fs::is_directory(root_ + "/opt/sagemaker_cluster"));
  // The bundle, with its subdirectory.
  EXPECT_EQ(ReadFile(BundleDir() + "/utils/helper.sh"), cp_.bundle["utils/helper.sh"]);
  EXPECT_EQ(ReadFile(BundleDir() + "/provisioning_parameters.json"),
            cp_.bundle["provisioning_parameters.json"]);

  const auto lines = cp_.LogMessages();
  EXPECT_TRUE(Contains(lines, "cwd=" + BundleDir())) << lines.size();
  EXPECT_TRUE(Contains(lines, "env=HOME LANG PATH PWD SAGEMAKER_RESOURCE_CONFIG_PATH SHLVL _ "));
  EXPECT_TRUE(Contains(lines, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"));
  EXPECT_TRUE(Contains(lines, "HOME=/root"));
  EXPECT_TRUE(Contains(lines, "LANG=C.UTF-8"));
  EXPECT_TRUE(Contains(lines, "SAGEMAKER_RESOURCE_CONFIG_PATH=" + root_ +
                                  "/opt/ml/config/resource_config.json"));
  EXPECT_TRUE(Contains(lines, "stdin=/dev/null"));
  // None of the agent's sockets leak into the script.
  EXPECT_TRUE(Contains(lines, "sockets=0"));
  EXPECT_TRUE(Contains(lines, "own-process-group"));
  EXPECT_TRUE(Contains(lines, "to stderr"));
  EXPECT_TRUE(Contains(lines, "helper ran in " + BundleDir()));
  EXPECT_TRUE(Contains(lines, "{\"controller_group\":\"ctl\"}"));
  EXPECT_TRUE(Contains(lines, "no newline at the end"));
  // Lines arrive in order.
  std::vector<std::string> numbered;
  for (const auto& l : lines) {
    if (l.rfind("line ", 0) == 0) numbered.push_back(l);
  }
  ASSERT_EQ(numbered.size(), 300u);
  for (int i = 0; i < 300; ++i) EXPECT_EQ(numbered[i], "line " + std::to_string(i + 1));
  // The long line is split into pieces of at most 16 KiB that add up to it.
  std::string joined;
  for (const auto& l : lines) {
    if (!l.empty() && l[0] == 'x') {
      EXPECT_LE(l.size(), 16u * 1024);
      joined += l;
    }
  }
  EXPECT_EQ(joined, long_line);
  {
    std::lock_guard<std::mutex> lock(cp_.mu());
    int64_t previous = 0;
    for (const auto& e : cp_.log_events) {
      const int64_t ts = e["timestamp"].get<int64_t>();
      EXPECT_GT(ts, 1600000000000);  // milliseconds, not seconds
      EXPECT_GE(ts, previous);
      previous = ts;
    }
  }
  EXPECT_EQ(cp_.ReportStates(), (std::vector<std::string>{"Started", "Succeeded"}));
  EXPECT_EQ(LastReport()["script"], "on_create.sh");
  // The node's own copy of the output and the recorded result.
  const std::string node_log = ReadFile(root_ + "/var/log/provision/hyperfleet-lifecycle.log");
  EXPECT_NE(node_log.find("line 300\n"), std::string::npos);
  const json record = json::parse(ReadFile(root_ + "/var/lib/hyperfleet-agent/lifecycle.json"));
  EXPECT_EQ(record["phase"], "finished");
  EXPECT_EQ(record["acknowledged"], true);
  EXPECT_EQ(record["report"]["state"], "Succeeded");
}

TEST_F(AgentTest, ScriptsGetTheProxyVariablesOfAgentEnv) {
  cp_.bundle["on_create.sh"] =
      "#!/bin/sh\necho \"proxy=$http_proxy|$HTTPS_PROXY|$no_proxy\"\n";
  AgentOptions options = Options();
  options.script_environment = {"http_proxy=http://10.224.4.1:3128",
                                "HTTPS_PROXY=http://10.224.4.1:3128", "no_proxy=localhost"};
  ASSERT_TRUE(RunAgent(options).ok());
  EXPECT_TRUE(Contains(cp_.LogMessages(),
                       "proxy=http://10.224.4.1:3128|http://10.224.4.1:3128|localhost"));
}

TEST_F(AgentTest, OnInitCompleteRunsAfterOnCreate) {
  cp_.registration["lifecycle"]["on_init_complete"] = "init_complete.sh";
  cp_.bundle["on_create.sh"] = "#!/bin/sh\necho create\n";
  cp_.bundle["init_complete.sh"] = "#!/bin/sh\necho init-complete\n";
  ASSERT_TRUE(RunAgent().ok());
  EXPECT_EQ(cp_.LogMessages(), (std::vector<std::string>{"create", "init-complete"}));
  EXPECT_EQ(cp_.ReportStates(), (std::vector<std::string>{"Started", "Succeeded"}));
}

TEST_F(AgentTest, NonZeroExitFails) {
  cp_.bundle["on_create.sh"] = "#!/bin/bash\necho failing\nexit 3\n";
  ASSERT_TRUE(RunAgent().ok());
  EXPECT_EQ(cp_.ReportStates(), (std::vector<std::string>{"Started", "Failed"}));
  const json report = LastReport();
  EXPECT_EQ(report["reason"], "exit");
  EXPECT_EQ(report["exit_code"], 3);
  EXPECT_EQ(report["message"], "Lifecycle script on_create.sh exited with status 3");
  EXPECT_EQ(cp_.LogMessages(), (std::vector<std::string>{"failing"}));
}

TEST_F(AgentTest, KilledBySignalSaysWhich) {
  cp_.bundle["on_create.sh"] = "#!/bin/bash\nkill -9 $$\n";
  ASSERT_TRUE(RunAgent().ok());
  const json report = LastReport();
  EXPECT_EQ(report["state"], "Failed");
  EXPECT_EQ(report["reason"], "exit");
  EXPECT_EQ(report["exit_code"], 137);
  EXPECT_EQ(report["message"], "Lifecycle script on_create.sh was killed by signal 9 (SIGKILL)");
}

TEST_F(AgentTest, TimeoutKillsTheProcessGroup) {
  cp_.registration["lifecycle"]["timeout_seconds"] = 1;
  // The background child shares the process group; it must die with the script.
  cp_.bundle["on_create.sh"] =
      "#!/bin/bash\necho started\nsleep 300 &\necho $! > child.pid\nsleep 300\n";
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(RunAgent().ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
  const json report = LastReport();
  EXPECT_EQ(report["state"], "Failed");
  EXPECT_EQ(report["reason"], "timeout");
  EXPECT_EQ(report["message"], "Lifecycle scripts execution timed out after 1 seconds");
  EXPECT_EQ(cp_.LogMessages(), (std::vector<std::string>{"started"}));
  const std::string pid = ReadFile(BundleDir() + "/child.pid");
  ASSERT_FALSE(pid.empty());
  // The child is gone (or a zombie being reaped by init).
  const std::string stat = ReadFile("/proc/" + pid.substr(0, pid.size() - 1) + "/stat");
  EXPECT_TRUE(stat.empty() || stat.find(") Z") != std::string::npos) << stat;
}

TEST_F(AgentTest, TimeoutEscalatesToSigkillWhenSigtermIsIgnored) {
  cp_.registration["lifecycle"]["timeout_seconds"] = 1;
  cp_.bundle["on_create.sh"] = "#!/bin/bash\ntrap '' TERM\necho stubborn\nsleep 300\n";
  ASSERT_TRUE(RunAgent().ok());
  const json report = LastReport();
  EXPECT_EQ(report["reason"], "timeout");
  EXPECT_EQ(report["exit_code"], 137);
}

TEST_F(AgentTest, MissingScriptFails) {
  cp_.bundle["other.sh"] = "#!/bin/sh\n";
  ASSERT_TRUE(RunAgent().ok());
  const json report = LastReport();
  EXPECT_EQ(report["state"], "Failed");
  EXPECT_EQ(report["reason"], "missing");
  const std::string message = report["message"];
  EXPECT_NE(message.find("on_create.sh"), std::string::npos) << message;
  EXPECT_NE(message.find("s3://bucket/prefix/"), std::string::npos) << message;
}

TEST_F(AgentTest, CrlfScriptFails) {
  cp_.bundle["on_create.sh"] = "#!/bin/bash\r\necho hi\r\n";
  ASSERT_TRUE(RunAgent().ok());
  const json report = LastReport();
  EXPECT_EQ(report["reason"], "crlf");
  const std::string message = report["message"];
  EXPECT_NE(message.find("Windows (CRLF) line endings"), std::string::npos) << message;
  EXPECT_NE(message.find("LF"), std::string::npos);
  EXPECT_TRUE(cp_.LogMessages().empty());
}

TEST_F(AgentTest, EmptyBundleFails) {
  ASSERT_TRUE(RunAgent().ok());
  EXPECT_EQ(cp_.ReportStates(), (std::vector<std::string>{"Started", "Failed"}));
  EXPECT_EQ(LastReport()["reason"], "empty");
}

TEST_F(AgentTest, UnsafeKeyFailsAndWritesNothing) {
  cp_.bundle["on_create.sh"] = "#!/bin/sh\necho should not run\n";
  cp_.extra_keys = {"utils/../../../escaped.sh"};
  ASSERT_TRUE(RunAgent().ok());
  const json report = LastReport();
  EXPECT_EQ(report["reason"], "unsafe-key");
  EXPECT_NE(report["message"].get<std::string>().find("utils/../../../escaped.sh"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(root_ + "/tmp/escaped.sh"));
  EXPECT_FALSE(fs::exists(BundleDir() + "/on_create.sh"));
  EXPECT_TRUE(cp_.LogMessages().empty());
}

TEST_F(AgentTest, AbsoluteKeyIsUnsafe) {
  EXPECT_FALSE(IsSafeBundleKey("/etc/passwd"));
  EXPECT_FALSE(IsSafeBundleKey(".."));
  EXPECT_FALSE(IsSafeBundleKey("a/../b"));
  EXPECT_FALSE(IsSafeBundleKey(""));
  EXPECT_TRUE(IsSafeBundleKey("a/..b/c..d/e"));
  EXPECT_TRUE(IsSafeBundleKey("utils/x.sh"));
}

TEST_F(AgentTest, ReportsAndLogsSurviveAControlPlaneRestartMidRun) {
  // The script waits for the test (a file) between its two halves.
  const std::string gate = root_ + "/gate";
  cp_.bundle["on_create.sh"] = "#!/bin/bash\necho before\nwhile [ ! -e " + gate +
                               " ]; do sleep 0.05; done\nfor i in 1 2 3; do echo after $i; done\n";
  const uint16_t port = cp_.port();
  StartAgent(Options());
  ASSERT_TRUE(cp_.WaitFor([&] { return !cp_.log_events.empty(); }));
  cp_.Stop();
  std::ofstream(gate).put('1');
  // While the control plane is away the script finishes; its output and result wait.
  ASSERT_TRUE(fs::exists(gate));
  ASSERT_TRUE(cp_.Start(port)) << cp_.last_error;
  ASSERT_EQ(done_.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(done_.get().ok());
  EXPECT_EQ(cp_.LogMessages(),
            (std::vector<std::string>{"before", "after 1", "after 2", "after 3"}));
  EXPECT_EQ(cp_.ReportStates(), (std::vector<std::string>{"Started", "Succeeded"}));
}

TEST_F(AgentTest, RegistrationRetriesUntilTheControlPlaneIsUp) {
  const uint16_t port = cp_.port();
  cp_.Stop();
  cp_.bundle["on_create.sh"] = "#!/bin/sh\necho ok\n";
  StartAgent(Options());
  // Connection refused for a while; the agent keeps trying.
  EXPECT_EQ(done_.wait_for(300ms), std::future_status::timeout);
  ASSERT_TRUE(cp_.Start(port));
  ASSERT_EQ(done_.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(done_.get().ok());
  EXPECT_EQ(cp_.ReportStates(), (std::vector<std::string>{"Started", "Succeeded"}));
}

TEST_F(AgentTest, NoSecondRunAfterAgentRestart) {
  cp_.bundle["on_create.sh"] = "#!/bin/sh\necho ran >> " + root_ + "/runs\n";
  ASSERT_TRUE(RunAgent().ok());
  ASSERT_TRUE(RunAgent().ok());
  EXPECT_EQ(ReadFile(root_ + "/runs"), "ran\n");
  EXPECT_EQ(cp_.ReportStates(), (std::vector<std::string>{"Started", "Succeeded"}));
  std::lock_guard<std::mutex> lock(cp_.mu());
  EXPECT_EQ(cp_.registrations, 2);
}

TEST_F(AgentTest, UnacknowledgedResultIsReportedAgainWithoutRerunning) {
  fs::create_directories(root_ + "/var/lib/hyperfleet-agent");
  std::ofstream(root_ + "/var/lib/hyperfleet-agent/lifecycle.json")
      << R"({"phase":"finished","acknowledged":false,"report":{"state":"Failed",)"
      << R"("script":"on_create.sh","reason":"exit","exit_code":2,"message":"m"}})";
  cp_.bundle["on_create.sh"] = "#!/bin/sh\necho ran >> " + root_ + "/runs\n";
  ASSERT_TRUE(RunAgent().ok());
  EXPECT_FALSE(fs::exists(root_ + "/runs"));
  EXPECT_EQ(cp_.ReportStates(), (std::vector<std::string>{"Failed"}));
  EXPECT_EQ(LastReport()["exit_code"], 2);
}

TEST_F(AgentTest, RunFalseMeansDoNotRun) {
  cp_.registration["lifecycle"]["run"] = false;
  cp_.bundle["on_create.sh"] = "#!/bin/sh\necho ran >> " + root_ + "/runs\n";
  ASSERT_TRUE(RunAgent().ok());
  EXPECT_FALSE(fs::exists(root_ + "/runs"));
  EXPECT_TRUE(cp_.ReportStates().empty());
}

TEST_F(AgentTest, HeldBackScriptsRunOnceTheControlPlaneSaysSo) {
  {
    std::lock_guard<std::mutex> lock(cp_.mu());
    cp_.wait_registrations = 2;
  }
  cp_.bundle["on_create.sh"] = "#!/bin/sh\necho ran >> " + root_ + "/runs\n";
  ASSERT_TRUE(RunAgent().ok());
  EXPECT_EQ(cp_.registrations, 3);
  EXPECT_EQ(ReadFile(root_ + "/runs"), "ran\n");
  EXPECT_EQ(cp_.ReportStates(), (std::vector<std::string>{"Started", "Succeeded"}));
  EXPECT_NE(ReadFile(root_ + "/var/log/provision/hyperfleet-lifecycle.log")
                .find("Waiting to run the lifecycle scripts: the controller first"),
            std::string::npos);
}

// start_units (an EKS node's kubelet): started after the scripts succeeded, logged in the
// node's lifecycle log after their result.
TEST_F(AgentTest, UnitsStartAfterTheScriptsSucceeded) {
  cp_.registration["start_units"] = {"containerd.service", "kubelet.service"};
  cp_.bundle["on_create.sh"] = "#!/bin/sh\necho ran >> " + root_ + "/runs\n";
  AgentOptions options = Options();
  std::vector<std::vector<std::string>> started;
  options.start_units = [&](const std::vector<std::string>& units) {
    // The scripts are over when the units start.
    EXPECT_EQ(ReadFile(root_ + "/runs"), "ran\n");
    started.push_back(units);
    return true;
  };
  ASSERT_TRUE(RunAgent(options).ok());
  EXPECT_EQ(started, (std::vector<std::vector<std::string>>{
                         {"containerd.service", "kubelet.service"}}));
  const std::string log = ReadFile(root_ + "/var/log/provision/hyperfleet-lifecycle.log");
  const size_t succeeded = log.find("[hyperfleet] The lifecycle scripts succeeded.");
  const size_t units = log.find("[hyperfleet] Started containerd.service kubelet.service\n");
  ASSERT_NE(units, std::string::npos) << log;
  EXPECT_LT(succeeded, units) << log;
}

TEST_F(AgentTest, UnitsDoNotStartAfterTheScriptsFailed) {
  cp_.registration["start_units"] = {"kubelet.service"};
  cp_.bundle["on_create.sh"] = "#!/bin/sh\nexit 3\n";
  AgentOptions options = Options();
  int calls = 0;
  options.start_units = [&](const std::vector<std::string>&) { return ++calls > 0; };
  ASSERT_TRUE(RunAgent(options).ok());
  EXPECT_EQ(LastReport()["state"], "Failed");
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(ReadFile(root_ + "/var/log/provision/hyperfleet-lifecycle.log").find("Started"),
            std::string::npos);
}

// After a reboot the control plane does not run the scripts again: the units start at once.
// One that does not start is logged, and the agent carries on.
TEST_F(AgentTest, UnitsStartAtOnceWhenNoScriptsAreToRun) {
  cp_.registration["lifecycle"]["run"] = false;
  cp_.registration["start_units"] = {"kubelet.service"};
  AgentOptions options = Options();
  std::vector<std::string> started;
  options.start_units = [&](const std::vector<std::string>& units) {
    started = units;
    return false;
  };
  ASSERT_TRUE(RunAgent(options).ok());
  EXPECT_EQ(started, (std::vector<std::string>{"kubelet.service"}));
  EXPECT_NE(ReadFile(root_ + "/var/log/provision/hyperfleet-lifecycle.log")
                .find("[hyperfleet] Could not start kubelet.service"),
            std::string::npos);
}

// Held until the control plane can make the node's files (an EKS node's kubelet files): the
// files of the answer that ends the wait are on the node before the scripts run.
TEST_F(AgentTest, FilesOfTheAnswerThatEndsTheWaitAreWrittenBeforeTheScripts) {
  cp_.registration["files_revision"] = 2;
  cp_.registration["files"] = json::array(
      {{{"path", "/etc/hyperfleet/kubelet.env"}, {"mode", 0644}, {"content", "KUBELET_ARGS=x\n"}}});
  cp_.registration["start_units"] = {"kubelet.service"};
  {
    std::lock_guard<std::mutex> lock(cp_.mu());
    cp_.wait_registrations = 2;
    cp_.wait_registration = cp_.registration;
    cp_.wait_registration["files_revision"] = 1;
    cp_.wait_registration["files"] = json::array();
    cp_.wait_registration.erase("start_units");
  }
  cp_.bundle["on_create.sh"] =
      "#!/bin/sh\ncat " + root_ + "/etc/hyperfleet/kubelet.env >> " + root_ + "/runs\n";
  AgentOptions options = Options();
  std::vector<std::string> started;
  options.start_units = [&](const std::vector<std::string>& units) {
    started = units;
    return true;
  };
  ASSERT_TRUE(RunAgent(options).ok());
  EXPECT_EQ(cp_.registrations, 3);
  EXPECT_EQ(ReadFile(root_ + "/runs"), "KUBELET_ARGS=x\n");
  EXPECT_EQ(ModeOf(root_ + "/etc/hyperfleet/kubelet.env"), 0644u);
  EXPECT_EQ(started, (std::vector<std::string>{"kubelet.service"}));
}

TEST(SlurmReloadTest, NodeChangesRestartOtherChangesReconfigure) {
  const std::string base =
      "ClusterName=c\nSlurmctldHost=ip-10-0-0-2(10.0.0.2)\n"
      "NodeName=ip-10-0-0-3 NodeHostname=ip-10-0-0-3 NodeAddr=10.0.0.3 CPUs=4\n"
      "PartitionName=dev Nodes=ALL Default=YES\n";
  EXPECT_EQ(SlurmReloadFor("", base), SlurmReload::kNone);  // first write: nothing runs yet
  EXPECT_EQ(SlurmReloadFor(base, base), SlurmReload::kNone);
  std::string partition = base;
  partition.replace(partition.find("Default=YES"), 11, "Default=NO");
  EXPECT_EQ(SlurmReloadFor(base, partition), SlurmReload::kReconfigure);
  EXPECT_EQ(SlurmReloadFor(base, base + "NodeName=ip-10-0-0-4 NodeAddr=10.0.0.4 CPUs=4\n"),
            SlurmReload::kRestart);
  std::string cpus = base;
  cpus.replace(cpus.find("CPUs=4"), 6, "CPUs=8");
  EXPECT_EQ(SlurmReloadFor(base, cpus), SlurmReload::kRestart);
  std::string moved = base;
  moved.replace(moved.find("10.0.0.2)"), 8, "10.0.0.9");
  EXPECT_EQ(SlurmReloadFor(base, moved), SlurmReload::kRestart);
}

TEST_F(AgentTest, ChangedSlurmConfIsReloadedAndConfirmedAtOnce) {
  ServeAddedSlurmNode();
  std::mutex mu;
  std::vector<SlurmReload> reloads;
  AgentOptions options = Options();
  options.once = false;
  options.reload_slurm = [&](SlurmReload r) {
    std::lock_guard<std::mutex> lock(mu);
    reloads.push_back(r);
    return true;
  };
  StartAgent(options);
  // The first heartbeat brings the new file; the agent reloads and confirms revision 7 in
  // the very next heartbeat (no interval in between).
  ASSERT_TRUE(cp_.WaitFor([&] { return cp_.heartbeat_revisions.size() >= 2; }, 10s));
  {
    std::lock_guard<std::mutex> lock(cp_.mu());
    EXPECT_EQ(cp_.heartbeat_revisions[1], 7);
  }
  agent_->Stop();
  ASSERT_EQ(done_.wait_for(10s), std::future_status::ready);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_FALSE(reloads.empty());
  EXPECT_EQ(reloads[0], SlurmReload::kRestart);
  EXPECT_EQ(ReadFile(root_ + "/opt/slurm/etc/slurm.conf"), "NodeName=a\nNodeName=b\n");
}

TEST_F(AgentTest, AFailedSlurmReloadIsRetriedAndNotConfirmedMeanwhile) {
  ServeAddedSlurmNode();
  std::mutex mu;
  std::vector<SlurmReload> reloads;
  AgentOptions options = Options();
  options.once = false;
  options.reload_slurm = [&](SlurmReload r) {
    std::lock_guard<std::mutex> lock(mu);
    reloads.push_back(r);
    return reloads.size() > 1;  // the first attempt fails (e.g. slurmctld down)
  };
  StartAgent(options);
  ASSERT_TRUE(cp_.WaitFor([&] { return cp_.heartbeat_revisions.size() >= 3; }, 10s));
  {
    std::lock_guard<std::mutex> lock(cp_.mu());
    EXPECT_NE(cp_.heartbeat_revisions[1], 7);  // not confirmed after the failure
    EXPECT_EQ(cp_.heartbeat_revisions[2], 7);  // confirmed once the retry worked
  }
  agent_->Stop();
  ASSERT_EQ(done_.wait_for(10s), std::future_status::ready);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_GE(reloads.size(), 2u);
  // The file is unchanged by then, but the pending restart is still owed.
  EXPECT_EQ(reloads[0], SlurmReload::kRestart);
  EXPECT_EQ(reloads[1], SlurmReload::kRestart);
}

TEST_F(AgentTest, HeartbeatsWriteNewFiles) {
  cp_.registration["heartbeat_seconds"] = 1;
  cp_.registration["lifecycle"]["run"] = false;
  cp_.heartbeat_response = {
      {"files_revision", 2},
      {"files", json::array({{{"path", "/opt/ml/config/resource_config.json"},
                              {"mode", 0600},
                              {"content", "v2"}}})}};
  AgentOptions options = Options();
  options.once = false;
  StartAgent(options);
  ASSERT_TRUE(cp_.WaitFor([&] { return cp_.heartbeats >= 1; }, 10s));
  // The file lands right after the response; give the write a deadline, not a sleep.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (ReadFile(root_ + "/opt/ml/config/resource_config.json") != "v2" &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(ReadFile(root_ + "/opt/ml/config/resource_config.json"), "v2");
  EXPECT_EQ(ModeOf(root_ + "/opt/ml/config/resource_config.json"), 0600u);
  agent_->Stop();
  ASSERT_EQ(done_.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(done_.get().ok());
}

// A register response without an interval: the agent heartbeats at the control plane's
// default (agentapi::kDefaultHeartbeatSeconds, 1 s), not at a slower pace of its own.
TEST_F(AgentTest, WithoutAnIntervalItHeartbeatsAtTheControlPlanesDefault) {
  cp_.registration.erase("heartbeat_seconds");
  cp_.registration["lifecycle"]["run"] = false;
  AgentOptions options = Options();
  options.once = false;
  StartAgent(options);
  EXPECT_TRUE(cp_.WaitFor([&] { return cp_.heartbeats >= 3; },
                          std::chrono::seconds(4 * agentapi::kDefaultHeartbeatSeconds + 2)));
  agent_->Stop();
  ASSERT_EQ(done_.wait_for(10s), std::future_status::ready);
}

TEST_F(AgentTest, WrongTokenIsRetriedNotFatal) {
  AgentOptions options = Options();
  options.token = "wrong";
  StartAgent(options);
  ASSERT_TRUE(cp_.WaitFor([&] { return cp_.forbidden >= 2; }, 10s));
  agent_->Stop();
  ASSERT_EQ(done_.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(done_.get().code(), absl::StatusCode::kCancelled);
}

// What today's control plane reads of an agent's messages is what the version 0 agent sent
// (fixtures/agent_messages_v0.json): this agent still sends every member of them, as a
// worker (failing scripts) and as a Slurm controller (Slurm view, governed jobs).
TEST_F(AgentTest, MessagesCarryEveryMemberOfTheVersionZeroAgents) {
  cp_.bundle["on_create.sh"] = "#!/bin/sh\necho failing\nexit 3\n";
  ASSERT_TRUE(RunAgent().ok());
  std::error_code ec;
  fs::remove_all(root_ + "/var/lib/hyperfleet-agent", ec);  // a new node, this time a controller
  {
    std::lock_guard<std::mutex> lock(cp_.mu());
    cp_.bundle["on_create.sh"] = "#!/bin/sh\necho hello\n";
    cp_.registration["heartbeat_seconds"] = 1;
    cp_.registration["files"] = json::array(
        {{{"path", "/opt/slurm/etc/slurm.conf"}, {"mode", 0644}, {"content", "NodeName=a\n"}}});
    cp_.heartbeat_response = {{"governance", {{"accounts", {"team-a"}}, {"qos", json::array()}}}};
  }
  AgentOptions options = Options();
  options.once = false;
  options.reload_slurm = [](SlurmReload) { return true; };
  options.run_slurm_commands = [](const std::string&) { return true; };
  options.query_slurm_nodes = [] {
    return std::optional<std::string>("ip-a|down*|2026-11-30T10:00:01|0/0/4/4|Hyperfleet: a\n");
  };
  options.query_slurm_jobs = [] {
    return std::optional<std::string>(
        "12\037team-a\037high-priority\037dev\0372\0372\037PENDING\0372026-11-30T10:00:00"
        "\037JobHeldAdmin\037hyperfleet-governed\036\n"
        "#partitions\nip-a|dev\n");
  };
  StartAgent(options);
  auto controller_heartbeat = [&]() -> const json* {
    for (const auto& b : cp_.heartbeat_bodies) {
      if (b.contains("slurm_jobs") && !b["slurm_jobs"]["jobs"].empty() && b.contains("slurm_nodes") &&
          b.contains("health")) {
        return &b;
      }
    }
    return nullptr;
  };
  ASSERT_TRUE(cp_.WaitFor([&] { return controller_heartbeat() != nullptr; }, 20s));
  agent_->Stop();
  ASSERT_EQ(done_.wait_for(10s), std::future_status::ready);

  std::lock_guard<std::mutex> lock(cp_.mu());
  const json& v0 = agentapi::fixtures::V0Messages();
  auto first_report = [&](const std::string& state) {
    for (const auto& r : cp_.reports) {
      if (r["state"] == state) return r;
    }
    return json();
  };
  const std::vector<std::pair<std::string, json>> now = {
      {"register", cp_.register_bodies.at(0)},
      {"lifecycle_started", first_report("Started")},
      {"lifecycle_failed", first_report("Failed")},
      {"lifecycle_succeeded", first_report("Succeeded")},
      {"logs", cp_.log_batches.at(0)},
      {"heartbeat", cp_.heartbeat_bodies.at(0)},
      {"heartbeat_slurm_controller", *controller_heartbeat()},
  };
  for (const auto& [name, message] : now) {
    const auto have = agentapi::fixtures::KeyPaths(message);
    for (const auto& path : agentapi::fixtures::KeyPaths(v0.at(name))) {
      EXPECT_TRUE(have.count(path)) << name << " lacks " << path << ": " << message.dump();
    }
    EXPECT_EQ(message.value("version", 0), agentapi::kProtocolVersion) << name;
  }
}

TEST(AgentEnvTest, ParsesEnvFile) {
  auto values = ParseEnvFile(
      "# comment\n\nHF_AGENT_URL=http://10.224.4.1:9081\nexport HF_INSTANCE_ID=\"i-1\"\n"
      "HF_AGENT_TOKEN='abc'\r\n");
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ((*values)["HF_AGENT_URL"], "http://10.224.4.1:9081");
  EXPECT_EQ((*values)["HF_INSTANCE_ID"], "i-1");
  EXPECT_EQ((*values)["HF_AGENT_TOKEN"], "abc");
  EXPECT_FALSE(ParseEnvFile("no equals sign\n").ok());
}

TEST(AgentEnvTest, LoadAgentEnvNamesTheMissingKey) {
  char tmpl[] = "/tmp/hf-agent-env-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/agent.env";
  std::ofstream(path) << "HF_AGENT_URL=http://x\nHF_INSTANCE_ID=i-1\n";
  AgentOptions options;
  const Status status = LoadAgentEnv(path, &options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find("HF_AGENT_TOKEN"), std::string::npos);
  EXPECT_EQ(LoadAgentEnv(path + ".absent", &options).code(), absl::StatusCode::kNotFound);
  fs::remove_all(tmpl);
}

TEST(AgentEnvTest, LoadAgentEnvKeepsProxyVariablesForScripts) {
  char tmpl[] = "/tmp/hf-agent-env-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/agent.env";
  std::ofstream(path) << "HF_AGENT_URL=http://x\nHF_INSTANCE_ID=i-1\nHF_AGENT_TOKEN=t\n"
                         "http_proxy=http://10.224.4.1:3128\nNO_PROXY=localhost,10.224.4.0/22\n"
                         "OTHER=ignored\n";
  AgentOptions options;
  ASSERT_TRUE(LoadAgentEnv(path, &options).ok());
  EXPECT_EQ(options.script_environment,
            (std::vector<std::string>{"http_proxy=http://10.224.4.1:3128",
                                      "NO_PROXY=localhost,10.224.4.0/22"}));
  fs::remove_all(tmpl);
}

TEST(NodePathTest, JoinsUnderRoot) {
  EXPECT_EQ(NodePath("/", "/opt/ml"), "/opt/ml");
  EXPECT_EQ(NodePath("/tmp/r/", "/opt/ml"), "/tmp/r/opt/ml");
  EXPECT_EQ(NodePath("/tmp/r", "/opt/ml"), "/tmp/r/opt/ml");
}

}  // namespace
}  // namespace hf::agent
