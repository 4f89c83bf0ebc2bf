// Aggregates, intervals, JSON and the table.
#include "hyperfleet/sim/report.h"

#include <gtest/gtest.h>

#include "hyperfleet/sim/grid.h"

namespace hf::sim {
namespace {

TEST(ReportTest, MeanIntervalUsesStudentT) {
  EXPECT_DOUBLE_EQ(StudentT95(19), 2.093);
  EXPECT_NEAR(StudentT95(1000), 1.962, 0.001);
  // Mean 3, sample sd 1.5811 (1..5), t(4) = 2.776: half width 1.963.
  const Interval i = MeanInterval({1, 2, 3, 4, 5});
  EXPECT_DOUBLE_EQ(i.mean, 3);
  EXPECT_NEAR(i.hi - i.mean, 2.776 * std::sqrt(2.5 / 5), 1e-9);
  EXPECT_NEAR(i.mean - i.lo, i.hi - i.mean, 1e-12);
  const Interval one = MeanInterval({0.5});
  EXPECT_EQ(one.lo, 0.5);
  EXPECT_EQ(one.hi, 0.5);
}

TEST(ReportTest, AggregateJsonAndTable) {
  GridSpec g;
  g.strategies = {HyperfleetStrategy()};
  g.spares = {8};
  g.seeds = 3;
  const std::vector<Aggregate> rows = RunGrid(g);
  ASSERT_EQ(rows.size(), 1u);
  const Aggregate& a = rows[0];
  EXPECT_EQ(a.replications, 3);
  EXPECT_EQ(a.fleet_nodes, 2048);
  EXPECT_EQ(a.label, "HF Hyperfleet planned");
  EXPECT_LE(a.ettr.lo, a.ettr.mean);
  EXPECT_GE(a.ettr.hi, a.ettr.mean);
  const nlohmann::json j = ToJson(a);
  EXPECT_EQ(j["strategy"], "HF");
  EXPECT_TRUE(j["loss_pct"].contains("rework"));
  EXPECT_TRUE(j["mttr_by_class_min"].contains("D4"));
  // The two kinds of healthy nodes taken out, apart (a hang's suspects, quarantined).
  EXPECT_TRUE(j.contains("hang_overevicted"));
  EXPECT_TRUE(j.contains("healthy_quarantined"));
  EXPECT_FALSE(j.contains("false_positive_evictions"));
  EXPECT_GT(j["hang_overevicted"].get<double>() + j["healthy_quarantined"].get<double>(), 0);
  RunResult r;
  r.false_positive_evictions = 3;
  r.healthy_quarantined = 5;
  const nlohmann::json rj = ToJson(r);
  EXPECT_EQ(rj["hang_overevicted"], 3);
  EXPECT_EQ(rj["healthy_quarantined"], 5);
  EXPECT_FALSE(j["assumptions"].empty());
  const std::string table = FormatTable(rows);
  EXPECT_NE(table.find("Hyperfleet"), std::string::npos);
  EXPECT_NE(table.find("assumptions, not measured"), std::string::npos);
  EXPECT_NE(table.find("detect.D4"), std::string::npos);
}

TEST(ReportTest, OneReplicationHasNoIntervalInTheTable) {
  GridSpec g;
  g.strategies = {HyperfleetStrategy()};
  g.job_nodes = {16};
  g.base.horizon_days = 2;
  g.seeds = 1;
  const std::string one = FormatTable(RunGrid(g));
  EXPECT_NE(one.find("± n/a"), std::string::npos) << one;
  EXPECT_EQ(one.find("± 0.0000"), std::string::npos) << one;
  g.seeds = 2;
  const std::string two = FormatTable(RunGrid(g));
  EXPECT_EQ(two.find("n/a"), std::string::npos) << two;
}

TEST(ReportTest, GridFleetSizing) {
  GridSpec g;
  EXPECT_EQ(GridFleetNodes(g, 2000, 48), 2048);
  EXPECT_EQ(GridFleetNodes(g, 128, 48), 176);
  EXPECT_EQ(GridFleetNodes(g, 512, 0), 525);
  g.fleet_nodes = 4096;
  EXPECT_EQ(GridFleetNodes(g, 2000, 48), 4096);
}

}  // namespace
}  // namespace hf::sim
