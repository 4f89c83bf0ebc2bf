// The pure GPU rules: Xids in the kernel log and their table, NVML snapshots, and NVIDIA GPUs
// on the PCI bus.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "hyperfleet/agent/health.h"
#include "unit/agent/health_test_util.h"

namespace hf::agent {
namespace {

using health_test::FindAll;
using health_test::TempDir;
using health_test::WriteText;

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

}  // namespace
}  // namespace hf::agent
