#pragma once
// What the health check tests share: finding lookups, files under a temp root, a fake
// systemctl and the monitor fixture built on them.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fakes/fake_clock.h"
#include "hyperfleet/agent/health.h"

namespace hf::agent::health_test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr uint64_t kGiB = uint64_t{1} << 30;
inline const SystemTime kNow = SystemTime(std::chrono::seconds(1767225600));  // 2026-01-01

inline std::vector<const HealthFinding*> FindAll(const HealthReport& r, std::string_view check) {
  std::vector<const HealthFinding*> out;
  for (const auto& f : r.findings) {
    if (f.check == check) out.push_back(&f);
  }
  return out;
}

inline std::vector<const HealthFinding*> FindAll(const std::vector<HealthFinding>& fs,
                                                 std::string_view check) {
  std::vector<const HealthFinding*> out;
  for (const auto& f : fs) {
    if (f.check == check) out.push_back(&f);
  }
  return out;
}

inline void WriteText(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

inline void AppendText(const std::string& path, const std::string& text) {
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

}  // namespace hf::agent::health_test
