// The monitor on a temp root with a fake systemctl: unit restarts and their budget, when
// systemctl runs, /proc and disks under the root, the clock; and RunCommand.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>

#include "hyperfleet/agent/health.h"
#include "unit/agent/health_test_util.h"

namespace hf::agent {
namespace {

namespace fs = std::filesystem;
using health_test::kNow;
using health_test::MonitorTest;
using health_test::WriteText;
using namespace std::chrono_literals;

TEST_F(MonitorTest, KilledSlurmdIsRestartedAndReportedAsAWarning) {
  systemd_.units["slurmd"] = {true, "failed", false};
  HealthMonitor monitor(Options());
  HealthReport r = monitor.Check();
  ASSERT_NE(r.Find("slurmd"), nullptr);
  EXPECT_EQ(r.Find("slurmd")->severity, Severity::kWarning);
  EXPECT_EQ(r.Find("slurmd")->message, "slurmd was failed; restarted by the agent (restart 1 of 3)");
  EXPECT_EQ(systemd_.Count("restart slurmd"), 1);
  EXPECT_EQ(systemd_.units["slurmd"].state, "active");
  EXPECT_EQ(r.Find("slurmctld"), nullptr);  // not installed: not this node's role
  EXPECT_EQ(r.checked_at, clock_.now());

  r = monitor.Check();  // found active: ok, and the restart budget starts again
  EXPECT_EQ(r.Find("slurmd")->severity, Severity::kOk);
  EXPECT_EQ(systemd_.Count("restart slurmd"), 1);
  systemd_.units["slurmd"].state = "inactive";
  r = monitor.Check();
  EXPECT_EQ(r.Find("slurmd")->message,
            "slurmd was inactive; restarted by the agent (restart 1 of 3)");
}

TEST_F(MonitorTest, SlurmdThatCannotBeRestartedIsASoftFault) {
  systemd_.units["slurmd"] = {true, "failed", true};
  HealthMonitor monitor(Options());
  HealthReport r = monitor.Check();
  EXPECT_EQ(systemd_.Count("restart slurmd"), 3);
  ASSERT_NE(r.Find("slurmd"), nullptr);
  EXPECT_EQ(r.Find("slurmd")->severity, Severity::kSoftFault);
  EXPECT_NE(r.Find("slurmd")->message.find("slurmd cannot be restarted: failed after 3 restarts"),
            std::string::npos)
      << r.Find("slurmd")->message;
  EXPECT_EQ(r.verdict(), Severity::kSoftFault);
  EXPECT_EQ(r.ToJson()["action"], "reboot");
  // The budget is spent: later rounds report the fault without restarting again.
  r = monitor.Check();
  EXPECT_EQ(systemd_.Count("restart slurmd"), 3);
  EXPECT_EQ(r.Find("slurmd")->severity, Severity::kSoftFault);
  // Someone fixed it: found active, ok again.
  systemd_.units["slurmd"] = {true, "active", false};
  r = monitor.Check();
  EXPECT_EQ(r.Find("slurmd")->severity, Severity::kOk);
}

TEST_F(MonitorTest, AFlappingSlurmdSpendsTheBudgetAcrossRounds) {
  systemd_.units["slurmd"] = {true, "failed", false};
  HealthMonitorOptions o = Options();
  o.max_restarts = 2;
  HealthMonitor monitor(o);
  EXPECT_EQ(monitor.Check().Find("slurmd")->severity, Severity::kWarning);
  // It died again before the next round: never found active at a round's start.
  systemd_.units["slurmd"].state = "failed";
  EXPECT_EQ(monitor.Check().Find("slurmd")->message,
            "slurmd was failed; restarted by the agent (restart 2 of 2)");
  systemd_.units["slurmd"].state = "failed";
  EXPECT_EQ(monitor.Check().Find("slurmd")->severity, Severity::kSoftFault);
  EXPECT_EQ(systemd_.Count("restart slurmd"), 2);
}

TEST_F(MonitorTest, SystemctlRunsOncePerIntervalUnlessAUnitIsInTrouble) {
  systemd_.units["slurmd"] = {true, "active", false};
  HealthMonitorOptions o = Options();
  o.command_interval = std::chrono::hours(1);
  HealthMonitor monitor(o);
  EXPECT_EQ(monitor.Check().Find("slurmd")->severity, Severity::kOk);
  const size_t calls = systemd_.calls.size();
  EXPECT_GT(calls, 0u);
  // Within the interval: the last findings, no new command.
  const HealthReport again = monitor.Check();
  ASSERT_NE(again.Find("slurmd"), nullptr);
  EXPECT_EQ(again.Find("init")->severity, Severity::kOk);
  EXPECT_EQ(systemd_.calls.size(), calls);
  // A unit that needed a restart is followed every round.
  HealthMonitor fresh(o);
  systemd_.units["slurmd"] = {true, "failed", false};
  EXPECT_EQ(fresh.Check().Find("slurmd")->severity, Severity::kWarning);
  const int restarts = systemd_.Count("restart slurmd");
  systemd_.units["slurmd"].state = "failed";
  fresh.Check();
  EXPECT_EQ(systemd_.Count("restart slurmd"), restarts + 1);
}

TEST_F(MonitorTest, UnitsOfOtherRolesAreLeftAlone) {
  systemd_.units["slurmd"] = {false, "inactive", false};    // disabled: not a worker
  systemd_.units["slurmctld"] = {true, "active", false};    // the controller
  HealthMonitor monitor(Options());
  const HealthReport r = monitor.Check();
  EXPECT_EQ(r.Find("slurmd"), nullptr);
  ASSERT_NE(r.Find("slurmctld"), nullptr);
  EXPECT_EQ(r.Find("slurmctld")->severity, Severity::kOk);
  EXPECT_EQ(systemd_.Count("restart slurmd"), 0);
  EXPECT_EQ(systemd_.Count("is-active slurmd"), 0);
}

TEST_F(MonitorTest, NoUnitIsTouchedWhileTheLifecycleScriptsRun) {
  systemd_.units["slurmd"] = {true, "inactive", false};
  HealthMonitor monitor(Options());
  CheckInputs inputs;
  inputs.services = false;
  const HealthReport r = monitor.Check(inputs);
  EXPECT_TRUE(systemd_.calls.empty());
  EXPECT_EQ(r.Find("slurmd"), nullptr);
  ASSERT_NE(r.Find("services"), nullptr);
  EXPECT_EQ(r.Find("services")->severity, Severity::kOk);
}

TEST_F(MonitorTest, InitThatDoesNotAnswerIsASoftFault) {
  systemd_.hang = true;
  HealthMonitor monitor(Options());
  EXPECT_EQ(monitor.Check().Find("init")->severity, Severity::kSoftFault);
  systemd_.hang = false;
  systemd_.system_state = "degraded";
  EXPECT_EQ(monitor.Check().Find("init")->severity, Severity::kWarning);
  systemd_.system_state = "running";
  EXPECT_EQ(monitor.Check().Find("init")->severity, Severity::kOk);
}

TEST_F(MonitorTest, ATestRootNeverRunsCommandsByDefault) {
  HealthMonitorOptions o = Options();
  o.run_command = nullptr;
  HealthMonitor monitor(o);
  const HealthReport r = monitor.Check();
  EXPECT_EQ(r.Find("init"), nullptr);
  EXPECT_EQ(r.Find("slurmd"), nullptr);
  // Clock sync is not read under a test root either.
  EXPECT_EQ(r.Find("clock")->message, "no reference");
}

TEST_F(MonitorTest, ReadsProcAndDisksUnderTheRoot) {
  WriteText(dir_.path() + "/proc/meminfo", "MemTotal: 1000000 kB\nMemAvailable: 10000 kB\n");
  WriteText(dir_.path() + "/proc/pressure/memory", "some avg10=2.00 avg60=0 avg300=0 total=1\n");
  fs::create_directories(dir_.path() + "/tmp");
  HealthMonitor monitor(Options());
  const HealthReport r = monitor.Check();
  ASSERT_NE(r.Find("memory"), nullptr);
  EXPECT_EQ(r.Find("memory")->severity, Severity::kWarning) << r.Find("memory")->message;
  EXPECT_NE(r.Find("memory")->message.find("some avg10 2.0%"), std::string::npos);
  ASSERT_NE(r.Find("disk:/"), nullptr);
  ASSERT_NE(r.Find("disk:/tmp"), nullptr);
  EXPECT_NE(r.Find("disk:/")->message.find("GiB free of"), std::string::npos);
}

TEST_F(MonitorTest, MissingMeminfoIsAWarningAndMissingMountsAreSkipped) {
  HealthMonitorOptions o = Options();
  o.disk_paths = {"/", "/scratch"};
  HealthMonitor monitor(o);
  const HealthReport r = monitor.Check();
  EXPECT_EQ(r.Find("memory")->severity, Severity::kWarning);
  EXPECT_NE(r.Find("disk:/"), nullptr);
  EXPECT_EQ(r.Find("disk:/scratch"), nullptr);
}

TEST_F(MonitorTest, ClockAgainstTheControlPlaneAndKernelSync) {
  HealthMonitorOptions o = Options();
  bool synced = true;
  o.clock_sync = [&] { return std::optional<ClockSync>(ClockSync{synced, 1000}); };
  HealthMonitor monitor(o);
  CheckInputs inputs;
  inputs.control_plane_time = TimeSample{kNow, kNow - 5s};
  EXPECT_EQ(monitor.Check(inputs).Find("clock")->severity, Severity::kOk);
  inputs.control_plane_time = TimeSample{kNow, kNow + 45s};
  const HealthReport r = monitor.Check(inputs);
  EXPECT_EQ(r.Find("clock")->severity, Severity::kWarning);
  EXPECT_NE(r.Find("clock")->message.find("-45.000 s"), std::string::npos);
  synced = false;
  inputs.control_plane_time.reset();
  EXPECT_EQ(monitor.Check(inputs).Find("clock")->severity, Severity::kWarning);
}

TEST_F(MonitorTest, TheCommandIntervalRunsOnTheMonitorsClock) {
  systemd_.units["slurmd"] = {true, "active", false};
  HealthMonitorOptions o = Options();
  o.command_interval = std::chrono::hours(1);
  HealthMonitor monitor(o);
  monitor.Check();
  const size_t calls = systemd_.calls.size();
  clock_.advance(59min);
  monitor.Check();
  EXPECT_EQ(systemd_.calls.size(), calls);
  clock_.advance(1min);  // an hour on the monitor's clock, whatever the real time
  monitor.Check();
  EXPECT_GT(systemd_.calls.size(), calls);
}

TEST_F(MonitorTest, RestartSettleAndDurationRunOnTheMonitorsClock) {
  systemd_.units["slurmd"] = {true, "activating", false};
  HealthMonitorOptions o = Options();
  o.restart_settle = 10s;
  o.poll_interval = 1ms;
  CommandRunner fake = systemd_.Runner();
  // Every is-active takes 3 s on the monitor's clock.
  o.run_command = [&](const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
    if (argv.at(1) == "is-active") clock_.advance(3s);
    return fake(argv, timeout);
  };
  HealthMonitor monitor(o);
  const HealthReport r = monitor.Check();
  // The first look, then polls at +0, +3, +6 and +9 s of the 10 s settle; still activating,
  // so restarted (the fake comes up at once) and looked at once more.
  EXPECT_EQ(systemd_.Count("is-active slurmd"), 6);
  EXPECT_EQ(systemd_.Count("restart slurmd"), 1);
  EXPECT_EQ(r.Find("slurmd")->message,
            "slurmd was activating; restarted by the agent (restart 1 of 3)");
  EXPECT_EQ(r.duration, 18s);
  EXPECT_EQ(r.checked_at, kNow);
}

TEST_F(MonitorTest, ASettleOnAClockThatDoesNotMoveStillEnds) {
  systemd_.units["slurmd"] = {true, "activating", false};
  HealthMonitorOptions o = Options();
  o.restart_settle = 50ms;
  o.poll_interval = 10ms;
  o.max_restarts = 1;
  CommandRunner fake = systemd_.Runner();
  o.run_command = [&](const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
    if (argv.at(1) == "restart") return CommandResult{true, false, 1, "still starting"};
    return fake(argv, timeout);
  };
  HealthMonitor monitor(o);
  const HealthReport r = monitor.Check();
  // settle / poll = 5 polls after each look, however long they took in real time.
  EXPECT_EQ(systemd_.Count("is-active slurmd"), 12);
  EXPECT_EQ(r.Find("slurmd")->severity, Severity::kSoftFault);
}

TEST(RunCommandTest, RunsCapturesAndTimesOut) {
  const CommandResult ok = RunCommand({"sh", "-c", "echo hello; echo there >&2; exit 3"}, 10s);
  EXPECT_TRUE(ok.started);
  EXPECT_FALSE(ok.timed_out);
  EXPECT_EQ(ok.exit_code, 3);
  EXPECT_EQ(ok.output, "hello\nthere");
  const CommandResult slow = RunCommand({"sleep", "30"}, 200ms);
  EXPECT_TRUE(slow.timed_out);
  const CommandResult missing = RunCommand({"hf-no-such-command"}, 1s);
  EXPECT_FALSE(missing.started);
}

}  // namespace
}  // namespace hf::agent
