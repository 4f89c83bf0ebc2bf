// The events a node's health reports make (agentapi/health_events.h), as a table.
#include "hyperfleet/agentapi/health_events.h"
#include "hyperfleet/agentapi/node_status_cache.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hf::agentapi {
namespace {

/// A report as the agent sends it, kept as the control plane keeps it.
model::HealthReport Report(const std::string& verdict, std::vector<HealthFinding> findings = {}) {
  HealthReport r;
  r.verdict = verdict;
  r.findings = std::move(findings);
  return ToModelHealth(r);
}

TEST(HealthEventsTest, VerdictChangesAndRestartsOnce) {
  model::Node node;
  node.instance_id = "i-1";
  node.group = "workers";
  node.logical_id = "workers-x";
  const HealthFinding slurmd{"slurmd", "soft_fault", "reboot", "cannot be restarted"};
  const HealthFinding gpu{"gpu.xid", "hard_fault", "replace", "Xid 79"};
  const HealthFinding restarted{"slurmd", "warning", "none", "slurmd restarted by the agent (1)"};
  struct Case {
    const char* name;
    model::HealthReport before, after;
    std::vector<std::string> want;  // "<level>: <description>"
  };
  const std::vector<Case> cases = {
      {"first report, ok", Report(""), Report("ok"), {}},
      {"ok to warning", Report("ok"), Report("warning"), {}},
      {"into a soft fault", Report("warning"), Report("soft_fault", {slurmd}),
       {"Error: Instance i-1 failed its health checks (soft fault, reboot): slurmd: cannot be "
        "restarted"}},
      {"the same fault again", Report("soft_fault", {slurmd}), Report("soft_fault", {slurmd}), {}},
      {"soft to hard", Report("soft_fault", {slurmd}), Report("hard_fault", {gpu}),
       {"Error: Instance i-1 failed its health checks (hardware fault, replace): gpu.xid: Xid 79"}},
      {"out of faults", Report("hard_fault", {gpu}), Report("ok"),
       {"Info: Instance i-1 passes its health checks again"}},
      {"a restart, once", Report("ok"), Report("warning", {restarted}),
       {"Warn: Instance i-1: slurmd restarted by the agent (1)"}},
      {"the same restart again", Report("warning", {restarted}), Report("warning", {restarted}),
       {}},
  };
  for (const auto& c : cases) {
    std::vector<std::string> got;
    for (const auto& e : HealthEvents(node, c.before, c.after)) {
      got.push_back(e.level + ": " + e.description);
      EXPECT_EQ(e.instance_id, "i-1");
      EXPECT_EQ(e.metadata["Instance"]["NodeLogicalId"], "workers-x");
    }
    EXPECT_EQ(got, c.want) << c.name;
  }
}

}  // namespace
}  // namespace hf::agentapi
