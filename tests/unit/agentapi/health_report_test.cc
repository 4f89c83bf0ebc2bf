// A heartbeat's health report as the control plane keeps it (agentapi::ToModelHealth), as a
// table, and the cache keeping it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hyperfleet/agentapi/node_status_cache.h"
#include "hyperfleet/common/clock.h"
#include "fakes/fake_clock.h"

namespace hf::agentapi {
namespace {

using model::HealthAction;
using model::HealthSeverity;
using std::chrono::milliseconds;

TEST(ModelHealthReportTest, WireReportToModel) {
  struct Case {
    const char* name;
    HealthReport wire;
    model::HealthReport want;
  };
  const SystemTime t = FromEpochSeconds(1'767'225'600.5);
  const std::vector<Case> cases = {
      {"a soft fault",
       {"soft_fault", "reboot", 1'767'225'600.5, 40,
        {{"slurmd", "soft_fault", "reboot", "cannot be restarted"},
         {"disk:/", "warning", "none", "90 % used"},
         {"memory", "ok", "none", "fine"}}},
       {HealthSeverity::kSoftFault, HealthAction::kReboot, t, milliseconds(40),
        {{"slurmd", HealthSeverity::kSoftFault, HealthAction::kReboot, "cannot be restarted"},
         {"disk:/", HealthSeverity::kWarning, HealthAction::kNone, "90 % used"},
         {"memory", HealthSeverity::kOk, HealthAction::kNone, "fine"}}}},
      {"a hard fault",
       {"hard_fault", "replace", 1'767'225'600.5, 0,
        {{"gpu.xid", "hard_fault", "replace", "Xid 79"}}},
       {HealthSeverity::kHardFault, HealthAction::kReplace, t, milliseconds(0),
        {{"gpu.xid", HealthSeverity::kHardFault, HealthAction::kReplace, "Xid 79"}}}},
      // A newer agent's words, and a version 0 agent's missing members: kUnknown, which the
      // planner treats as it treated these strings before (no fault).
      {"unknown severity and action",
       {"meltdown", "reflash", 1'767'225'600.5, 3, {{"", "catastrophic", "pray", "?"}}},
       {HealthSeverity::kUnknown, HealthAction::kUnknown, t, milliseconds(3),
        {{"", HealthSeverity::kUnknown, HealthAction::kUnknown, "?"}}}},
      {"empty strings", {"", "", 0, 0, {}},
       {HealthSeverity::kUnknown, HealthAction::kUnknown, FromEpochSeconds(0), milliseconds(0),
        {}}},
      {"case matters", {"OK", "None", 1'767'225'600.5, 0, {}},
       {HealthSeverity::kUnknown, HealthAction::kUnknown, t, milliseconds(0), {}}},
  };
  for (const auto& c : cases) {
    const model::HealthReport got = ToModelHealth(c.wire);
    EXPECT_EQ(got, c.want) << c.name;
    EXPECT_EQ(got.checked_at, c.want.checked_at) << c.name;
    EXPECT_EQ(model::ToString(got.verdict), c.want.verdict == HealthSeverity::kUnknown
                                                ? std::string("unknown")
                                                : c.wire.verdict)
        << c.name;
  }
}

TEST(ModelHealthReportTest, EveryKnownStringRoundTrips) {
  for (const char* s : {"ok", "warning", "soft_fault", "hard_fault"}) {
    EXPECT_NE(model::ParseHealthSeverity(s), HealthSeverity::kUnknown) << s;
    EXPECT_EQ(model::ToString(model::ParseHealthSeverity(s)), s);
  }
  for (const char* s : {"none", "reboot", "replace"}) {
    EXPECT_NE(model::ParseHealthAction(s), HealthAction::kUnknown) << s;
    EXPECT_EQ(model::ToString(model::ParseHealthAction(s)), s);
  }
  EXPECT_EQ(model::ParseHealthSeverity("unknown"), HealthSeverity::kUnknown);
  EXPECT_EQ(model::ParseHealthAction("unknown"), HealthAction::kUnknown);
}

TEST(ModelHealthReportTest, TheCacheKeepsTheReportForThePlanner) {
  testing::FakeClock clock;
  NodeStatusCache cache(clock, 1);
  const model::HealthReport fault = ToModelHealth({"hard_fault", "replace", 1'767'225'600, 0,
                                                   {{"gpu.xid", "hard_fault", "replace", "Xid 79"}}});
  EXPECT_FALSE(cache.recordHealth("i-1", fault).has_value());  // not tracked
  cache.track("i-1", "c1");
  cache.track("i-2", "c1");
  EXPECT_EQ(cache.recordHealth("i-1", fault), model::HealthReport{});  // none before
  EXPECT_EQ(cache.recordHealth("i-1", fault), fault);
  const model::ClusterHealthView view = cache.clusterHealth("c1");
  ASSERT_EQ(view.nodes.size(), 2u);
  EXPECT_EQ(view.nodes.at("i-1").health, fault);
  EXPECT_FALSE(view.nodes.at("i-2").health.has_value());
  EXPECT_EQ(cache.lastHealth().size(), 1u);
}

}  // namespace
}  // namespace hf::agentapi
