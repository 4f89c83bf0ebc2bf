// The pure health rules: severities and the report, disk, memory, clock, init and units.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>

#include "hyperfleet/agent/health.h"
#include "unit/agent/health_test_util.h"

namespace hf::agent {
namespace {

using health_test::kGiB;
using health_test::kNow;
using json = nlohmann::json;
using namespace std::chrono_literals;

// ---------------------------------------------------------------------------------------
// Report

TEST(HealthReportTest, SeverityNamesAndActions) {
  EXPECT_EQ(SeverityName(Severity::kOk), "ok");
  EXPECT_EQ(SeverityName(Severity::kWarning), "warning");
  EXPECT_EQ(SeverityName(Severity::kSoftFault), "soft_fault");
  EXPECT_EQ(SeverityName(Severity::kHardFault), "hard_fault");
  EXPECT_EQ(SeverityAction(Severity::kOk), "none");
  EXPECT_EQ(SeverityAction(Severity::kWarning), "none");
  EXPECT_EQ(SeverityAction(Severity::kSoftFault), "reboot");
  EXPECT_EQ(SeverityAction(Severity::kHardFault), "replace");
}

TEST(HealthReportTest, VerdictIsTheWorstFindingAndJsonCarriesEverything) {
  HealthReport r;
  EXPECT_EQ(r.verdict(), Severity::kOk);
  r.checked_at = SystemTime(std::chrono::seconds(1767225600));
  r.duration = 12ms;
  r.findings = {{"disk:/", Severity::kOk, "fine"},
                {"slurmd", Severity::kSoftFault, "slurmd cannot be restarted"},
                {"memory", Severity::kWarning, "low"}};
  EXPECT_EQ(r.verdict(), Severity::kSoftFault);
  ASSERT_NE(r.Find("memory"), nullptr);
  EXPECT_EQ(r.Find("memory")->message, "low");
  EXPECT_EQ(r.Find("gpu.ecc"), nullptr);
  const json j = r.ToJson();
  EXPECT_EQ(j["verdict"], "soft_fault");
  EXPECT_EQ(j["action"], "reboot");
  EXPECT_DOUBLE_EQ(j["checked_at"].get<double>(), 1767225600.0);
  EXPECT_EQ(j["duration_ms"], 12);
  ASSERT_EQ(j["findings"].size(), 3u);
  EXPECT_EQ(j["findings"][1]["check"], "slurmd");
  EXPECT_EQ(j["findings"][1]["severity"], "soft_fault");
  EXPECT_EQ(j["findings"][1]["action"], "reboot");
  EXPECT_EQ(j["findings"][1]["message"], "slurmd cannot be restarted");
  r.findings.push_back({"gpu.ecc", Severity::kHardFault, "ecc"});
  EXPECT_EQ(r.ToJson()["action"], "replace");
}

// ---------------------------------------------------------------------------------------
// Disk

TEST(DiskCheckTest, PlentyOfSpaceIsOk) {
  const HealthFinding f = EvaluateDisk("/", {100 * kGiB, 40 * kGiB, 1000, 900});
  EXPECT_EQ(f.check, "disk:/");
  EXPECT_EQ(f.severity, Severity::kOk);
  EXPECT_NE(f.message.find("40.0 GiB free of 100.0 GiB (40.0%)"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("inodes 90.0% free"), std::string::npos) << f.message;
}

TEST(DiskCheckTest, UnderOneGibIsAWarningEvenOnASmallDisk) {
  const HealthFinding f = EvaluateDisk("/tmp", {4 * kGiB, kGiB - 1, 0, 0});
  EXPECT_EQ(f.check, "disk:/tmp");
  EXPECT_EQ(f.severity, Severity::kWarning);
  EXPECT_NE(f.message.find("low on space"), std::string::npos) << f.message;
}

TEST(DiskCheckTest, UnderTwoPercentIsAWarningEvenWithManyGib) {
  // 10 TiB disk with 100 GiB free: 0.98 %.
  EXPECT_EQ(EvaluateDisk("/", {10240 * kGiB, 100 * kGiB, 0, 0}).severity, Severity::kWarning);
  // 3 % free stays ok.
  EXPECT_EQ(EvaluateDisk("/", {10240 * kGiB, 308 * kGiB, 0, 0}).severity, Severity::kOk);
}

TEST(DiskCheckTest, FullDiskAndInodesAreWarningsNotFaults) {
  const HealthFinding full = EvaluateDisk("/", {100 * kGiB, 0, 0, 0});
  EXPECT_EQ(full.severity, Severity::kWarning);
  EXPECT_NE(full.message.find("full"), std::string::npos);
  const HealthFinding inodes = EvaluateDisk("/", {100 * kGiB, 50 * kGiB, 1000000, 10});
  EXPECT_EQ(inodes.severity, Severity::kWarning);
  EXPECT_NE(inodes.message.find("low on inodes"), std::string::npos) << inodes.message;
  EXPECT_NE(EvaluateDisk("/", {100 * kGiB, 50 * kGiB, 1000, 0}).message.find("out of inodes"),
            std::string::npos);
}

TEST(DiskCheckTest, ThresholdsAreConfigurable) {
  DiskThresholds t;
  t.min_free_bytes = 50 * kGiB;
  EXPECT_EQ(EvaluateDisk("/", {100 * kGiB, 40 * kGiB, 0, 0}, t).severity, Severity::kWarning);
  EXPECT_EQ(EvaluateDisk("/", {0, 0, 0, 0}).severity, Severity::kOk);  // pseudo file system
}

// ---------------------------------------------------------------------------------------
// Memory

constexpr const char* kMeminfo =
    "MemTotal:       16384000 kB\n"
    "MemFree:         1000000 kB\n"
    "MemAvailable:    8192000 kB\n"
    "Buffers:           10000 kB\n";

TEST(MemoryCheckTest, AvailableMemoryAndCalmPressureAreOk) {
  const HealthFinding f =
      EvaluateMemory(kMeminfo, "some avg10=1.50 avg60=0.80 avg300=0.10 total=12345\n"
                               "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
  EXPECT_EQ(f.check, "memory");
  EXPECT_EQ(f.severity, Severity::kOk) << f.message;
  EXPECT_NE(f.message.find("(50.0%)"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("some avg10 1.5%"), std::string::npos) << f.message;
}

TEST(MemoryCheckTest, LowAvailableMemoryIsAWarning) {
  const HealthFinding f = EvaluateMemory(
      "MemTotal: 16384000 kB\nMemAvailable: 500000 kB\n", "");  // 3 %
  EXPECT_EQ(f.severity, Severity::kWarning);
  EXPECT_NE(f.message.find("below 5.0%"), std::string::npos) << f.message;
}

TEST(MemoryCheckTest, HighPressureIsAWarning) {
  const HealthFinding f = EvaluateMemory(kMeminfo, "some avg10=75.00 avg60=60.00 avg300=20.00 total=1\n"
                                                   "full avg10=40.00 avg60=30.00 avg300=9.00 total=1\n");
  EXPECT_EQ(f.severity, Severity::kWarning);
  EXPECT_NE(f.message.find("stalled"), std::string::npos) << f.message;
  // Just under the limit stays ok.
  EXPECT_EQ(EvaluateMemory(kMeminfo, "some avg10=49.99 avg60=0 avg300=0 total=1\n").severity,
            Severity::kOk);
}

TEST(MemoryCheckTest, UnreadableMeminfoIsAWarning) {
  EXPECT_EQ(EvaluateMemory("", "").severity, Severity::kWarning);
  EXPECT_EQ(EvaluateMemory("MemTotal: 1000 kB\n", "").severity, Severity::kWarning);
  EXPECT_EQ(EvaluateMemory("MemTotal: x kB\nMemAvailable: 10 kB\n", "").severity,
            Severity::kWarning);
}

// ---------------------------------------------------------------------------------------
// Clock

TEST(ClockCheckTest, SmallSkewAndSynchronisedIsOk) {
  const HealthFinding f = EvaluateClock(kNow, kNow - 29s, ClockSync{true, 5000});
  EXPECT_EQ(f.check, "clock");
  EXPECT_EQ(f.severity, Severity::kOk) << f.message;
  EXPECT_NE(f.message.find("+29.000 s"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("synchronised"), std::string::npos) << f.message;
}

TEST(ClockCheckTest, SkewBeyondThirtySecondsEitherWayIsAWarning) {
  EXPECT_EQ(EvaluateClock(kNow, kNow - 31s, std::nullopt).severity, Severity::kWarning);
  const HealthFinding behind = EvaluateClock(kNow, kNow + 31s, std::nullopt);
  EXPECT_EQ(behind.severity, Severity::kWarning);
  EXPECT_NE(behind.message.find("-31.000 s"), std::string::npos) << behind.message;
  ClockThresholds t;
  t.max_skew = 60s;
  EXPECT_EQ(EvaluateClock(kNow, kNow - 31s, std::nullopt, t).severity, Severity::kOk);
}

TEST(ClockCheckTest, UnsynchronisedOrResetClockIsAWarning) {
  EXPECT_EQ(EvaluateClock(kNow, std::nullopt, ClockSync{false, 16000000}).severity,
            Severity::kWarning);
  const HealthFinding reset = EvaluateClock(SystemTime(std::chrono::seconds(86400)),
                                            std::nullopt, std::nullopt);
  EXPECT_EQ(reset.severity, Severity::kWarning);
  EXPECT_NE(reset.message.find("real-time clock"), std::string::npos) << reset.message;
  const HealthFinding nothing = EvaluateClock(kNow, std::nullopt, std::nullopt);
  EXPECT_EQ(nothing.severity, Severity::kOk);
  EXPECT_EQ(nothing.message, "no reference");
}

// ---------------------------------------------------------------------------------------
// Init and units (pure)

TEST(InitCheckTest, StatesMapToSeverities) {
  EXPECT_EQ(EvaluateInit({true, false, 0, "running\n"}).severity, Severity::kOk);
  EXPECT_EQ(EvaluateInit({true, false, 1, "starting\n"}).severity, Severity::kOk);
  const HealthFinding degraded = EvaluateInit({true, false, 1, "degraded\n"});
  EXPECT_EQ(degraded.severity, Severity::kWarning);
  EXPECT_NE(degraded.message.find("systemctl --failed"), std::string::npos);
  EXPECT_EQ(EvaluateInit({true, false, 1, "stopping\n"}).severity, Severity::kWarning);
  const HealthFinding hung = EvaluateInit({true, true, 143, ""});
  EXPECT_EQ(hung.severity, Severity::kSoftFault);
  EXPECT_EQ(hung.check, "init");
  EXPECT_EQ(EvaluateInit({false, false, 0, ""}).severity, Severity::kOk);
}

TEST(ServiceCheckTest, ActiveRestartedAndUnrestartable) {
  ServiceObservation o;
  o.state_before = "active";
  EXPECT_EQ(EvaluateService("slurmd", o).severity, Severity::kOk);

  o = {};
  o.state_before = "failed";
  o.restarts_this_round = 1;
  o.restarts_total = 1;
  o.active_after = true;
  HealthFinding f = EvaluateService("slurmd", o);
  EXPECT_EQ(f.severity, Severity::kWarning);
  EXPECT_EQ(f.message, "slurmd was failed; restarted by the agent (restart 1 of 3)");

  o.active_after = false;
  o.restarts_this_round = 3;
  o.restarts_total = 3;
  o.last_output = "Job for slurmd.service failed.\nSee journalctl";
  f = EvaluateService("slurmd", o);
  EXPECT_EQ(f.check, "slurmd");
  EXPECT_EQ(f.severity, Severity::kSoftFault);
  EXPECT_EQ(f.message,
            "slurmd cannot be restarted: failed after 3 restarts (Job for slurmd.service failed.)");
}

}  // namespace
}  // namespace hf::agent
