// Node health checks: each pure rule, the monitor with a fake systemctl and a temp root, the
// GPU paths through a fake libnvidia-ml (fake_nvml.cc), and the heartbeat carrying the report.
#include "hyperfleet/agent/health.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fakes/fake_clock.h"
#include "hyperfleet/agent/agent.h"
#include "hyperfleet/agent/nvml.h"
#include "unit/agent/fake_control_plane.h"

namespace hf::agent {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr uint64_t kGiB = uint64_t{1} << 30;

std::vector<const HealthFinding*> FindAll(const HealthReport& r, std::string_view check) {
  std::vector<const HealthFinding*> out;
  for (const auto& f : r.findings) {
    if (f.check == check) out.push_back(&f);
  }
  return out;
}

std::vector<const HealthFinding*> FindAll(const std::vector<HealthFinding>& fs,
                                          std::string_view check) {
  std::vector<const HealthFinding*> out;
  for (const auto& f : fs) {
    if (f.check == check) out.push_back(&f);
  }
  return out;
}

void WriteText(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

void AppendText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << text;
}

// A temp directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/hf-health-test-XXXXXX";
    path_ = mkdtemp(tmpl) != nullptr ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

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

const SystemTime kNow = SystemTime(std::chrono::seconds(1767225600));  // 2026-01-01

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

// ---------------------------------------------------------------------------------------
// Xid

TEST(XidTest, ParsesBothFormatsAndKmsgRecords) {
  const std::string log =
      "[  12.3] some other line\n"
      "[ 100.1] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"
      "4,5678,123456789,-;NVRM: Xid (PCI:0000:5e:00): 31, pid=99, name=python, Ch 00000008\n"
      "NVRM: Xid (0000:86:00): 48, An uncorrectable double bit error\n"
      "NVRM: Xid (PCI:0000:86:00): not-a-number\n"
      "NVRM: Xid (broken\n";
  const auto xids = ParseXids(log);
  ASSERT_EQ(xids.size(), 3u);
  EXPECT_EQ(xids[0].pci, "0000:3b:00");
  EXPECT_EQ(xids[0].xid, 79);
  EXPECT_EQ(xids[0].text, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.");
  EXPECT_EQ(xids[1].pci, "0000:5e:00");
  EXPECT_EQ(xids[1].xid, 31);
  EXPECT_EQ(xids[2].pci, "0000:86:00");
  EXPECT_EQ(xids[2].xid, 48);
  EXPECT_TRUE(ParseXids("no xid here\n").empty());
}

TEST(XidTest, TableSortsApplicationFromHardwareXids) {
  for (int app : {13, 31, 43, 45}) EXPECT_EQ(XidRuleFor(app).severity, Severity::kOk) << app;
  for (int reboot : {61, 62, 63, 73, 94, 119, 120}) {
    EXPECT_EQ(XidRuleFor(reboot).severity, Severity::kSoftFault) << reboot;
  }
  for (int replace : {48, 64, 74, 79, 95}) {
    EXPECT_EQ(XidRuleFor(replace).severity, Severity::kHardFault) << replace;
  }
  EXPECT_EQ(XidRuleFor(9999).severity, Severity::kWarning);
  for (int xid : {13, 48, 63, 73, 74, 79, 9999}) EXPECT_FALSE(XidRuleFor(xid).source.empty());
}

TEST(XidTest, FindingsAreGroupedPerGpuAndXid) {
  const auto findings = EvaluateXids({{"0000:3b:00", 31, "NVRM: Xid (PCI:0000:3b:00): 31, a"},
                                      {"0000:3b:00", 31, "NVRM: Xid (PCI:0000:3b:00): 31, b"},
                                      {"0000:5e:00", 79, "NVRM: Xid (PCI:0000:5e:00): 79, c"}});
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].check, "gpu.xid");
  EXPECT_EQ(findings[0].severity, Severity::kOk);
  EXPECT_NE(findings[0].message.find("2 times this boot: logged only"), std::string::npos)
      << findings[0].message;
  EXPECT_NE(findings[0].message.find("first: NVRM: Xid (PCI:0000:3b:00): 31, a"),
            std::string::npos);
  EXPECT_EQ(findings[1].severity, Severity::kHardFault);
  EXPECT_NE(findings[1].message.find("GPU has fallen off the bus"), std::string::npos);
  const auto none = EvaluateXids({});
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0].severity, Severity::kOk);
}

// ---------------------------------------------------------------------------------------
// GPUs (pure)

GpuSnapshot HealthyGpus(unsigned n) {
  GpuSnapshot s;
  s.count = n;
  for (unsigned i = 0; i < n; ++i) {
    GpuStatus g;
    g.index = i;
    g.temperature_c = 40;
    g.slowdown_c = 90;
    g.throttle_reasons = 0x1;  // idle: not a slowdown
    g.ecc_uncorrected = 0;
    g.retired_pages_pending = false;
    g.remap_pending = false;
    g.remap_failed = false;
    s.gpus.push_back(g);
  }
  return s;
}

Severity Worst(const std::vector<HealthFinding>& findings) {
  Severity worst = Severity::kOk;
  for (const auto& f : findings) worst = std::max(worst, f.severity);
  return worst;
}

TEST(GpuCheckTest, HealthyGpusGiveOneOkPerCheck) {
  const auto findings = EvaluateGpus(HealthyGpus(8), 8u, "instance type");
  EXPECT_EQ(Worst(findings), Severity::kOk);
  for (const char* check : {"gpu.count", "gpu.lost", "gpu.ecc", "gpu.remap", "gpu.retired_pages",
                            "gpu.temperature", "gpu.throttle"}) {
    EXPECT_EQ(FindAll(findings, check).size(), 1u) << check;
  }
  EXPECT_EQ(FindAll(findings, "gpu.count")[0]->message, "8 GPUs, as expected (instance type)");
}

TEST(GpuCheckTest, CountMismatchIsASoftFault) {
  const auto findings = EvaluateGpus(HealthyGpus(7), 8u, "instance type");
  const auto count = FindAll(findings, "gpu.count");
  ASSERT_EQ(count.size(), 1u);
  EXPECT_EQ(count[0]->severity, Severity::kSoftFault);
  EXPECT_EQ(count[0]->message, "7 GPUs visible to NVML, expected 8 (instance type)");
  EXPECT_EQ(FindAll(EvaluateGpus(HealthyGpus(7), std::nullopt), "gpu.count")[0]->severity,
            Severity::kOk);
}

TEST(GpuCheckTest, EachFaultHasItsSeverity) {
  GpuSnapshot s = HealthyGpus(8);
  s.gpus[3].ecc_uncorrected = 2;
  s.gpus[4].remap_pending = true;
  s.gpus[5].remap_failed = true;
  s.gpus[6].retired_pages_pending = true;
  s.gpus[7].temperature_c = 91;
  s.gpus[0].throttle_reasons = kThrottleHwSlowdown | 0x1;
  s.gpus[1].lost = true;
  s.gpus[1].errors = {"temperature: GPU is lost (15)"};
  const auto findings = EvaluateGpus(s, 8u);
  auto only = [&](const char* check) {
    const auto all = FindAll(findings, check);
    EXPECT_EQ(all.size(), 1u) << check;
    return all.empty() ? HealthFinding{} : *all[0];
  };
  EXPECT_EQ(only("gpu.ecc").severity, Severity::kHardFault);
  EXPECT_EQ(only("gpu.ecc").message, "gpu3: 2 uncorrectable ECC errors since the driver loaded");
  const auto remap = FindAll(findings, "gpu.remap");
  ASSERT_EQ(remap.size(), 2u);
  EXPECT_EQ(remap[0]->severity, Severity::kSoftFault);
  EXPECT_EQ(remap[0]->message, "gpu4: row remapping pending (applied by a GPU reset)");
  EXPECT_EQ(remap[1]->severity, Severity::kHardFault);
  EXPECT_EQ(only("gpu.retired_pages").severity, Severity::kSoftFault);
  EXPECT_EQ(only("gpu.temperature").severity, Severity::kWarning);
  EXPECT_NE(only("gpu.temperature").message.find("gpu7: 91 °C"), std::string::npos);
  EXPECT_EQ(only("gpu.throttle").severity, Severity::kWarning);
  EXPECT_EQ(only("gpu.throttle").message, "gpu0: clocks reduced: hardware slowdown");
  EXPECT_EQ(only("gpu.lost").severity, Severity::kHardFault);
  EXPECT_EQ(Worst(findings), Severity::kHardFault);
}

TEST(GpuCheckTest, FallbackSlowdownThresholdAndUncountableGpus) {
  GpuSnapshot s = HealthyGpus(1);
  s.gpus[0].slowdown_c.reset();
  s.gpus[0].temperature_c = 85;
  EXPECT_EQ(FindAll(EvaluateGpus(s, 1u), "gpu.temperature")[0]->severity, Severity::kWarning);
  s.gpus[0].temperature_c = 84;
  EXPECT_EQ(FindAll(EvaluateGpus(s, 1u), "gpu.temperature")[0]->severity, Severity::kOk);
  GpuSnapshot broken;
  broken.error = "nvmlDeviceGetCount_v2: Unknown Error (999)";
  EXPECT_EQ(Worst(EvaluateGpus(broken, 8u)), Severity::kSoftFault);
  EXPECT_EQ(Worst(EvaluateGpus(broken, std::nullopt)), Severity::kWarning);
}

TEST(GpuCheckTest, CountsNvidiaGpusOnThePciBus) {
  TempDir dir;
  const std::string devices = dir.path() + "/sys/bus/pci/devices";
  auto device = [&](const std::string& addr, const std::string& vendor, const std::string& klass) {
    WriteText(devices + "/" + addr + "/vendor", vendor + "\n");
    WriteText(devices + "/" + addr + "/class", klass + "\n");
  };
  device("0000:3b:00.0", "0x10de", "0x030200");  // H100 (3D controller)
  device("0000:5e:00.0", "0x10de", "0x030000");  // VGA
  device("0000:07:00.0", "0x10de", "0x068000");  // NVSwitch (bridge): not a GPU
  device("0000:00:02.0", "0x8086", "0x030000");  // another vendor's VGA
  EXPECT_EQ(CountPciGpus(devices), 2u);
  EXPECT_EQ(CountPciGpus(dir.path() + "/nowhere"), 0u);
}

// ---------------------------------------------------------------------------------------
// The monitor with a fake systemctl

// Just enough systemctl for the monitor: units with an enabled flag and a state; restart
// brings a unit up unless it is broken.
class FakeSystemd {
 public:
  struct Unit {
    bool enabled = true;
    std::string state = "active";
    bool broken = false;  // restart fails and it stays "failed"
  };
  std::map<std::string, Unit> units;
  std::string system_state = "running";
  bool hang = false;  // is-system-running times out
  std::vector<std::string> calls;  // "verb unit"

  int Count(const std::string& call) const {
    return static_cast<int>(std::count(calls.begin(), calls.end(), call));
  }

  CommandRunner Runner() {
    return [this](const std::vector<std::string>& argv, std::chrono::milliseconds) {
      CommandResult r;
      EXPECT_EQ(argv.at(0), "systemctl");
      const std::string verb = argv.at(1);
      if (verb == "is-system-running") {
        if (hang) return CommandResult{true, true, 143, ""};
        return CommandResult{true, false, system_state == "running" ? 0 : 1, system_state};
      }
      const std::string name = argv.at(2);
      calls.push_back(verb + " " + name);
      auto it = units.find(name);
      if (verb == "is-enabled") {
        if (it == units.end()) {
          return CommandResult{true, false, 1,
                               "Failed to get unit file state for " + name +
                                   ".service: No such file or directory"};
        }
        return CommandResult{true, false, it->second.enabled ? 0 : 1,
                             it->second.enabled ? "enabled" : "disabled"};
      }
      if (verb == "is-active") {
        const std::string state = it == units.end() ? "inactive" : it->second.state;
        return CommandResult{true, false, state == "active" ? 0 : 3, state};
      }
      if (verb == "restart" && it != units.end()) {
        if (it->second.broken) {
          it->second.state = "failed";
          return CommandResult{true, false, 1,
                               "Job for " + name + ".service failed because the control "
                               "process exited with error code."};
        }
        it->second.state = "active";
        return CommandResult{true, false, 0, ""};
      }
      ADD_FAILURE() << "unexpected systemctl " << verb;
      return CommandResult{true, false, 1, ""};
    };
  }
};

class MonitorTest : public ::testing::Test {
 protected:
  HealthMonitorOptions Options() {
    HealthMonitorOptions o;
    o.root = dir_.path();
    o.run_command = systemd_.Runner();
    o.restart_settle = 0ms;  // the fake is active at once or never
    o.command_interval = 0ms;  // every round checks the units (one test covers the interval)
    o.nvml = false;
    o.clock = &clock_;
    return o;
  }
  TempDir dir_;
  FakeSystemd systemd_;
  hf::testing::FakeClock clock_;
};

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

// ---------------------------------------------------------------------------------------
// NVML through the fake library

class NvmlTest : public MonitorTest {
 protected:
  void SetUp() override {
    config_ = dir_.path() + "/fake-nvml.conf";
    setenv("HF_FAKE_NVML", config_.c_str(), 1);
  }
  void TearDown() override { unsetenv("HF_FAKE_NVML"); }

  void Configure(const std::string& text) { WriteText(config_, text); }

  HealthMonitorOptions GpuOptions() {
    HealthMonitorOptions o = Options();
    o.nvml = true;
    o.nvml_library = HF_FAKE_NVML_LIBRARY;
    o.expected_gpus = 8;
    // A readable, empty kernel log: no Xids.
    WriteText(dir_.path() + "/dev/kmsg", "");
    return o;
  }

  static int ActiveInits() {
    void* handle = dlopen(HF_FAKE_NVML_LIBRARY, RTLD_NOW | RTLD_NOLOAD);
    if (handle == nullptr) return 0;
    auto active = reinterpret_cast<int (*)()>(dlsym(handle, "hf_fake_nvml_active"));
    const int n = active != nullptr ? active() : -1;
    dlclose(handle);
    return n;
  }

  std::string config_;
};

TEST_F(NvmlTest, HealthyEightGpus) {
  Configure("count=8\n");
  HealthMonitor monitor(GpuOptions());
  const HealthReport r = monitor.Check();
  ASSERT_NE(r.Find("nvml"), nullptr);
  EXPECT_EQ(r.Find("nvml")->message, std::string("loaded ") + HF_FAKE_NVML_LIBRARY);
  EXPECT_EQ(r.Find("gpu.count")->message, "8 GPUs, as expected (instance type)");
  for (const char* check : {"gpu.count", "gpu.lost", "gpu.ecc", "gpu.remap", "gpu.retired_pages",
                            "gpu.temperature", "gpu.throttle", "gpu.xid"}) {
    ASSERT_EQ(FindAll(r, check).size(), 1u) << check;
    EXPECT_EQ(FindAll(r, check)[0]->severity, Severity::kOk) << check;
  }
  for (const auto& f : r.findings) {
    if (f.check.starts_with("gpu") || f.check == "nvml") {
      EXPECT_EQ(f.severity, Severity::kOk) << f.check << ": " << f.message;
    }
  }
}

TEST_F(NvmlTest, SevenOfEightIsASoftFault) {
  Configure("count=7\n");
  HealthMonitor monitor(GpuOptions());
  const HealthReport r = monitor.Check();
  EXPECT_EQ(r.Find("gpu.count")->severity, Severity::kSoftFault);
  EXPECT_EQ(r.Find("gpu.count")->message, "7 GPUs visible to NVML, expected 8 (instance type)");
  EXPECT_EQ(r.ToJson()["action"], "reboot");
}

TEST_F(NvmlTest, UncorrectableEccIsAHardFault) {
  Configure("count=8\ngpu3.ecc_uncorrected=3\n");
  HealthMonitor monitor(GpuOptions());
  const HealthReport r = monitor.Check();
  const auto ecc = FindAll(r, "gpu.ecc");
  ASSERT_EQ(ecc.size(), 1u);
  EXPECT_EQ(ecc[0]->severity, Severity::kHardFault);
  EXPECT_EQ(ecc[0]->message, "gpu3: 3 uncorrectable ECC errors since the driver loaded");
  EXPECT_EQ(r.verdict(), Severity::kHardFault);
  EXPECT_EQ(r.ToJson()["action"], "replace");
}

TEST_F(NvmlTest, HotOrThrottledIsAWarning) {
  Configure("count=8\ngpu2.temperature=95\ngpu2.slowdown=92\ngpu5.throttle=0x40\n");
  HealthMonitor monitor(GpuOptions());
  const HealthReport r = monitor.Check();
  EXPECT_EQ(r.Find("gpu.temperature")->severity, Severity::kWarning);
  EXPECT_EQ(r.Find("gpu.temperature")->message,
            "gpu2: 95 °C, at or above the slowdown threshold 92 °C");
  EXPECT_EQ(r.Find("gpu.throttle")->severity, Severity::kWarning);
  EXPECT_EQ(r.Find("gpu.throttle")->message, "gpu5: clocks reduced: hardware thermal slowdown");
}

TEST_F(NvmlTest, RemappingRetirementAndLostGpus) {
  Configure("count=8\ngpu1.remap_pending=1\ngpu2.remap_failed=1\ngpu3.retired_pending=1\n"
            "gpu4.lost=1\ngpu6.ecc_rc=3\n");
  HealthMonitor monitor(GpuOptions());
  const HealthReport r = monitor.Check();
  const auto remap = FindAll(r, "gpu.remap");
  ASSERT_EQ(remap.size(), 2u);
  EXPECT_EQ(remap[0]->severity, Severity::kSoftFault);
  EXPECT_EQ(remap[1]->severity, Severity::kHardFault);
  EXPECT_EQ(r.Find("gpu.retired_pages")->severity, Severity::kSoftFault);
  EXPECT_EQ(r.Find("gpu.lost")->severity, Severity::kHardFault);
  EXPECT_NE(r.Find("gpu.lost")->message.find("gpu4: lost (temperature: GPU is lost (15)"),
            std::string::npos)
      << r.Find("gpu.lost")->message;
  // ECC not supported on gpu6 is silence, not an error.
  EXPECT_EQ(r.Find("gpu.ecc")->severity, Severity::kOk);
}

TEST_F(NvmlTest, AbsentNvmlMeansNoGpuFindings) {
  HealthMonitorOptions o = GpuOptions();
  o.nvml_library = dir_.path() + "/libnvidia-ml.so.1";  // does not exist
  HealthMonitor monitor(o);
  const HealthReport r = monitor.Check();
  ASSERT_NE(r.Find("nvml"), nullptr);
  EXPECT_EQ(r.Find("nvml")->severity, Severity::kOk);
  EXPECT_TRUE(r.Find("nvml")->message.starts_with("not present")) << r.Find("nvml")->message;
  for (const auto& f : r.findings) EXPECT_FALSE(f.check.starts_with("gpu")) << f.check;
}

TEST_F(NvmlTest, InitFailureWithGpusOnTheBusIsASoftFault) {
  Configure("init=9\n");  // NVML_ERROR_DRIVER_NOT_LOADED
  HealthMonitorOptions o = GpuOptions();
  {
    HealthMonitor monitor(o);
    const HealthReport r = monitor.Check();
    EXPECT_EQ(r.Find("nvml")->severity, Severity::kWarning);
    EXPECT_NE(r.Find("nvml")->message.find("Driver Not Loaded"), std::string::npos)
        << r.Find("nvml")->message;
  }
  WriteText(dir_.path() + "/sys/bus/pci/devices/0000:3b:00.0/vendor", "0x10de\n");
  WriteText(dir_.path() + "/sys/bus/pci/devices/0000:3b:00.0/class", "0x030200\n");
  HealthMonitor monitor(o);
  EXPECT_EQ(monitor.Check().Find("nvml")->severity, Severity::kSoftFault);
}

TEST_F(NvmlTest, ExpectedCountFallsBackToThePciBus) {
  Configure("count=1\n");
  for (const char* addr : {"0000:3b:00.0", "0000:5e:00.0"}) {
    WriteText(dir_.path() + "/sys/bus/pci/devices/" + addr + "/vendor", "0x10de\n");
    WriteText(dir_.path() + "/sys/bus/pci/devices/" + addr + "/class", "0x030200\n");
  }
  HealthMonitorOptions o = GpuOptions();
  o.expected_gpus.reset();
  HealthMonitor monitor(o);
  const HealthReport r = monitor.Check();
  EXPECT_EQ(r.Find("gpu.count")->severity, Severity::kSoftFault);
  EXPECT_EQ(r.Find("gpu.count")->message,
            "1 GPU visible to NVML, expected 2 (NVIDIA GPUs on the PCI bus)");
}

TEST_F(NvmlTest, LibraryComesFromTheEnvironmentAndIsShutDown) {
  Configure("count=2\n");
  setenv("HF_NVML_LIBRARY", HF_FAKE_NVML_LIBRARY, 1);
  EXPECT_EQ(Nvml::DefaultLibrary(), HF_FAKE_NVML_LIBRARY);
  {
    auto nvml = Nvml::Open();
    unsetenv("HF_NVML_LIBRARY");
    ASSERT_TRUE(nvml.ok()) << nvml.status();
    EXPECT_EQ(ActiveInits(), 1);
    const GpuSnapshot s = (*nvml)->Query();
    EXPECT_EQ(s.count, 2u);
    ASSERT_EQ(s.gpus.size(), 2u);
    EXPECT_EQ(s.gpus[1].temperature_c, 40u);
    EXPECT_EQ(s.gpus[1].slowdown_c, 90u);
    EXPECT_EQ(s.gpus[1].throttle_reasons, 0u);  // via the old symbol name
    EXPECT_EQ(s.gpus[1].remap_failed, false);
  }
  EXPECT_EQ(ActiveInits(), 0);
  EXPECT_EQ(Nvml::DefaultLibrary(), "libnvidia-ml.so.1");
  EXPECT_TRUE(absl::IsNotFound(Nvml::Open("/nonexistent/libnvidia-ml.so.1").status()));
}

TEST_F(NvmlTest, XidsFromTheKernelLogPersistForTheBoot) {
  Configure("count=8\n");
  HealthMonitorOptions o = GpuOptions();
  const std::string kmsg = dir_.path() + "/dev/kmsg";
  WriteText(kmsg, "6,100,1000,-;NVRM: Xid (PCI:0000:3b:00): 31, pid=7, name=python\n");
  HealthMonitor monitor(o);
  HealthReport r = monitor.Check();
  ASSERT_EQ(FindAll(r, "gpu.xid").size(), 1u);
  EXPECT_EQ(r.Find("gpu.xid")->severity, Severity::kOk);
  EXPECT_NE(r.Find("gpu.xid")->message.find("logged only"), std::string::npos);
  // A record arrives in two pieces: only a whole line counts.
  AppendText(kmsg, "3,101,2000,-;NVRM: Xid (PCI:0000:5e:00): 7");
  r = monitor.Check();
  EXPECT_EQ(FindAll(r, "gpu.xid").size(), 1u);
  AppendText(kmsg, "9, pid=0, GPU has fallen off the bus.\n");
  r = monitor.Check();
  const auto xids = FindAll(r, "gpu.xid");
  ASSERT_EQ(xids.size(), 2u);
  EXPECT_EQ(xids[1]->severity, Severity::kHardFault);
  EXPECT_NE(xids[1]->message.find("Xid 79"), std::string::npos);
  // Nothing new: still reported (the fault stays until the node is rebooted or replaced).
  r = monitor.Check();
  EXPECT_EQ(FindAll(r, "gpu.xid").size(), 2u);
  EXPECT_EQ(r.verdict(), Severity::kHardFault);
}

TEST_F(NvmlTest, UnreadableKernelLogOnAGpuNodeIsAWarning) {
  Configure("count=8\n");
  HealthMonitorOptions o = GpuOptions();
  o.kernel_log = "/dev/no-kmsg";
  HealthMonitor monitor(o);
  const HealthReport r = monitor.Check();
  ASSERT_NE(r.Find("gpu.xid"), nullptr);
  EXPECT_EQ(r.Find("gpu.xid")->severity, Severity::kWarning);
  EXPECT_NE(r.Find("gpu.xid")->message.find("Xids not checked"), std::string::npos);
}

// ---------------------------------------------------------------------------------------
// The heartbeat carries the report

class HeartbeatHealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cp_.Start());
    cp_.registration["heartbeat_seconds"] = 1;
    cp_.registration["lifecycle"]["run"] = false;
    // No GPU paths here, whatever the machine has.
    setenv("HF_NVML_LIBRARY", (dir_.path() + "/no-nvml.so").c_str(), 1);
  }
  void TearDown() override {
    if (agent_) agent_->Stop();
    if (done_.valid()) done_.wait();
    cp_.Stop();
    unsetenv("HF_NVML_LIBRARY");
  }
  AgentOptions Options() {
    AgentOptions o;
    o.url = cp_.url();
    o.instance_id = testing::FakeControlPlane::kInstanceId;
    o.token = testing::FakeControlPlane::kToken;
    o.root = dir_.path();
    o.boot_id = "test-boot";
    o.backoff_initial = 20ms;
    o.request_timeout_seconds = 5;
    return o;
  }
  void Start(AgentOptions o) {
    agent_ = std::make_unique<Agent>(std::move(o));
    done_ = std::async(std::launch::async, [this] { return agent_->Run(); });
  }
  TempDir dir_;
  testing::FakeControlPlane cp_;
  std::unique_ptr<Agent> agent_;
  std::future<Status> done_;
};

TEST_F(HeartbeatHealthTest, EveryHeartbeatCarriesTheReport) {
  WriteText(dir_.path() + "/proc/meminfo", "MemTotal: 1000000 kB\nMemAvailable: 10000 kB\n");
  // The control plane's clock is an hour ahead: the next report says so.
  {
    std::lock_guard<std::mutex> lock(cp_.mu());
    cp_.heartbeat_response = {{"time", ToEpochSeconds(std::chrono::system_clock::now()) + 3600}};
  }
  Start(Options());
  // Checks run on their own thread: a heartbeat carries the latest finished report, so the
  // skew shows in a report checked after the first response arrived (a later heartbeat).
  auto skew_in = [](const json& body) {
    if (!body.contains("health")) return false;
    for (const auto& f : body["health"]["findings"]) {
      if (f["check"] == "clock" && f["severity"] == "warning" &&
          f["message"].get<std::string>().find("skew beyond 30 s") != std::string::npos) {
        return true;
      }
    }
    return false;
  };
  ASSERT_TRUE(cp_.WaitFor([&] {
    for (size_t k = 1; k < cp_.heartbeat_bodies.size(); ++k) {
      if (skew_in(cp_.heartbeat_bodies[k])) return true;
    }
    return false;
  }, 15s));
  agent_->Stop();
  ASSERT_EQ(done_.wait_for(10s), std::future_status::ready);
  std::lock_guard<std::mutex> lock(cp_.mu());
  const json& first = cp_.heartbeat_bodies[0];
  ASSERT_TRUE(first.contains("health")) << first.dump();
  const json& health = first["health"];
  EXPECT_EQ(health["verdict"], "warning") << health.dump();
  EXPECT_EQ(health["action"], "none");
  EXPECT_TRUE(health["checked_at"].is_number());
  bool memory = false, nvml = false;
  for (const auto& f : health["findings"]) {
    if (f["check"] == "memory") memory = f["severity"] == "warning";
    if (f["check"] == "nvml") nvml = f["message"].get<std::string>().starts_with("not present");
    EXPECT_NE(f["check"], "init");  // a test root never runs systemctl
  }
  EXPECT_TRUE(memory) << health.dump();
  EXPECT_TRUE(nvml) << health.dump();
  // The first report could not know the control plane's clock yet.
  EXPECT_FALSE(skew_in(first)) << first.dump();
  EXPECT_EQ(cp_.heartbeat_bodies[1]["files_revision"], 0);
}

TEST_F(HeartbeatHealthTest, HealthChecksCanBeTurnedOff) {
  AgentOptions o = Options();
  o.health_checks = false;
  Start(o);
  ASSERT_TRUE(cp_.WaitFor([&] { return cp_.heartbeat_bodies.size() >= 1; }, 15s));
  agent_->Stop();
  ASSERT_EQ(done_.wait_for(10s), std::future_status::ready);
  std::lock_guard<std::mutex> lock(cp_.mu());
  EXPECT_FALSE(cp_.heartbeat_bodies[0].contains("health")) << cp_.heartbeat_bodies[0].dump();
}

}  // namespace
}  // namespace hf::agent
