// The monitor's GPU paths through a fake libnvidia-ml (fake_nvml.cc): counts, faults, an
// absent or broken NVML, the library's lifetime, and Xids from the kernel log.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "hyperfleet/agent/health.h"
#include "hyperfleet/agent/nvml.h"
#include "unit/agent/health_test_util.h"

namespace hf::agent {
namespace {

using health_test::AppendText;
using health_test::FindAll;
using health_test::MonitorTest;
using health_test::WriteText;

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

}  // namespace
}  // namespace hf::agent
