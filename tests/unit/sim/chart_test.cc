// The SVG chart writer: well-formed XML (parsed with pugixml here; hf_sim itself links no
// XML library), escaped text, points that map monotonically, a y range that fits the data,
// and no crash on empty or one-point series.
#include "hyperfleet/sim/chart.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <pugixml.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace hf::sim {
namespace {

/// Parses `svg`; fails the test with pugixml's message when it is not well-formed.
pugi::xml_document Parse(const std::string& svg) {
  pugi::xml_document doc;
  pugi::xml_parse_result result = doc.load_string(svg.c_str());
  EXPECT_TRUE(result) << result.description() << " at offset " << result.offset;
  return doc;
}

/// The polyline vertices of each series group ("series" class), in document order.
std::vector<std::vector<std::pair<double, double>>> Polylines(const pugi::xml_document& doc) {
  std::vector<std::vector<std::pair<double, double>>> out;
  for (auto g : doc.select_nodes("//g[@class='series']")) {
    std::vector<std::pair<double, double>> points;
    auto line = g.node().child("polyline");
    std::istringstream in(line.attribute("points").value());
    std::string pair;
    while (in >> pair) {
      auto comma = pair.find(',');
      points.emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
    }
    out.push_back(std::move(points));
  }
  return out;
}

/// Every text element's content, in document order.
std::vector<std::string> Texts(const pugi::xml_document& doc) {
  std::vector<std::string> out;
  for (auto t : doc.select_nodes("//text")) out.push_back(t.node().text().get());
  return out;
}

LineChart TwoStrategies() {
  std::vector<EttrObservation> obs = {
      {"HyperPod classic", 16, 0.80, 0.79, 0.81}, {"HyperPod classic", 0, 0.70, 0.69, 0.71},
      {"HyperPod classic", 48, 0.82, 0.81, 0.83}, {"Hyperfleet", 0, 0.93, 0.92, 0.94},
      {"Hyperfleet", 16, 0.97, 0.965, 0.975},     {"Hyperfleet", 48, 0.975, 0.97, 0.98},
  };
  return EttrAgainstSparesChart(obs, "N = 2,000 of F = 2,048, r_f = 3.8");
}

TEST(ChartTest, ReportFigureIsWellFormedWithOneLinePerStrategyAndALegend) {
  std::vector<LineChart> charts = {TwoStrategies()};
  std::string svg = RenderSvg(charts);
  auto doc = Parse(svg);
  auto root = doc.child("svg");
  ASSERT_TRUE(root);
  EXPECT_STREQ(root.attribute("xmlns").value(), "http://www.w3.org/2000/svg");
  auto lines = Polylines(doc);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].size(), 3u);
  EXPECT_EQ(doc.select_nodes("//g[@class='series']/path[@class='bar']").size(), 6u);
  auto texts = Texts(doc);
  auto has = [&](const std::string& s) {
    return std::find(texts.begin(), texts.end(), s) != texts.end();
  };
  EXPECT_TRUE(has("ETTR against hot spares"));
  EXPECT_TRUE(has("HyperPod classic"));  // legend
  EXPECT_TRUE(has("Hyperfleet"));
  EXPECT_TRUE(has("hot spares (nodes)"));
  EXPECT_TRUE(has("16"));  // ticks at the spare counts
  EXPECT_TRUE(has("48"));
}

TEST(ChartTest, TextIsEscaped) {
  LineChart chart;
  chart.title = "a < b & \"c\" > 'd'";
  chart.x_label = "</text><script>alert(1)</script>";
  chart.series = {{"A&B <x>", {{1, 2}, {2, 3}}}};
  chart.references = {{2.5, "ref & <ref>"}};
  std::vector<LineChart> charts = {chart};
  std::string svg = RenderSvg(charts);
  EXPECT_EQ(svg.find("<script>"), std::string::npos);
  // pugixml passes a bare '&' through, so check the text: every '&' starts an entity.
  for (size_t at = svg.find('&'); at != std::string::npos; at = svg.find('&', at + 1)) {
    std::string next = svg.substr(at, 6);
    EXPECT_TRUE(next.rfind("&amp;", 0) == 0 || next.rfind("&lt;", 0) == 0 ||
                next.rfind("&gt;", 0) == 0 || next.rfind("&quot;", 0) == 0 ||
                next.rfind("&apos;", 0) == 0)
        << "bare '&' at " << at << ": " << svg.substr(at, 20);
  }
  auto doc = Parse(svg);
  auto texts = Texts(doc);
  EXPECT_NE(std::find(texts.begin(), texts.end(), chart.title), texts.end());
  EXPECT_NE(std::find(texts.begin(), texts.end(), chart.x_label), texts.end());
  EXPECT_NE(std::find(texts.begin(), texts.end(), "A&B <x>"), texts.end());
  EXPECT_NE(std::find(texts.begin(), texts.end(), "ref & <ref>"), texts.end());
  EXPECT_STREQ(doc.select_node("//g[@class='series']").node().attribute("data-name").value(),
               "A&B <x>");
}

TEST(ChartTest, ControlCharactersDoNotBreakTheXml) {
  LineChart chart;
  chart.title = std::string("bell\x07 and nul-free \x01");
  chart.series = {{"s", {{0, 0}}}};
  std::vector<LineChart> charts = {chart};
  Parse(RenderSvg(charts));
}

TEST(ChartTest, PointsMapMonotonically) {
  LineChart chart;
  chart.series = {{"rising", {}}, {"falling", {}}};
  for (int i = 0; i < 9; ++i) {
    double x = 0.7 * i * i;  // uneven spacing
    chart.series[0].points.push_back({x, std::sqrt(x)});
    chart.series[1].points.push_back({x, -x});
  }
  std::vector<LineChart> charts = {chart};
  auto lines = Polylines(Parse(RenderSvg(charts)));
  ASSERT_EQ(lines.size(), 2u);
  for (size_t i = 1; i < lines[0].size(); ++i) {
    EXPECT_GT(lines[0][i].first, lines[0][i - 1].first);   // larger x: further right
    EXPECT_LT(lines[0][i].second, lines[0][i - 1].second);  // larger y: higher up (smaller)
    EXPECT_GT(lines[1][i].second, lines[1][i - 1].second);
    EXPECT_DOUBLE_EQ(lines[0][i].first, lines[1][i].first);  // same x, same column
  }
}

TEST(ChartTest, YRangeFitsTheDataAndTheBarsInsideThePlot) {
  // Two series whose bars reach above and below the points: every marker and bar end must
  // lie within the plot frame (the axis line's vertical extent).
  LineChart chart;
  chart.series = {{"a", {{0, 0.5, 0.45, 0.55}, {1, 0.6, 0.5, 0.7}}},
                  {"b", {{0, 0.9, 0.88, 0.93}, {1, 0.95, 0.94, 0.96}}}};
  chart.y_percent = true;
  chart.y_floor = 0;
  chart.y_ceiling = 1;
  std::vector<LineChart> charts = {chart};
  auto doc = Parse(RenderSvg(charts));
  double top = kChartHeight, bottom = 0;
  // The y ticks are the texts ending in " %": the range must stay within 40 %..100 %.
  for (const auto& t : Texts(doc)) {
    if (t.size() > 2 && t.substr(t.size() - 2) == " %") {
      double v = std::stod(t);
      EXPECT_GE(v, 40.0) << t;
      EXPECT_LE(v, 100.0) << t;
    }
  }
  for (const auto& line : Polylines(doc)) {
    for (const auto& [x, y] : line) top = std::min(top, y), bottom = std::max(bottom, y);
  }
  EXPECT_GT(top, 76);                  // below the title block
  EXPECT_LT(bottom, kChartHeight - 64);  // above the x axis
}

TEST(ChartTest, EmptyAndOnePointSeriesDoNotCrash) {
  LineChart empty;
  empty.title = "nothing";
  LineChart no_points;
  no_points.series = {{"none", {}}};
  LineChart one;
  one.series = {{"one", {{3, 0.5, 0.4, 0.6}}}};
  LineChart flat;
  flat.series = {{"flat", {{1, 7}, {2, 7}}}};
  LineChart odd;
  odd.series = {{"nan", {{NAN, 1}, {1, INFINITY}, {2, 2}}}};
  std::vector<LineChart> charts = {empty, no_points, one, flat, odd};
  auto doc = Parse(RenderSvg(charts));
  EXPECT_EQ(doc.select_nodes("//g[@class='chart']").size(), 5u);
  auto lines = Polylines(doc);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_TRUE(lines[0].empty());
  ASSERT_EQ(lines[1].size(), 1u);
  EXPECT_TRUE(std::isfinite(lines[1][0].first) && std::isfinite(lines[1][0].second));
  EXPECT_EQ(lines[3].size(), 1u);  // only the finite point
  for (const auto& line : lines) {
    for (const auto& [x, y] : line) EXPECT_TRUE(std::isfinite(x) && std::isfinite(y));
  }
  std::vector<LineChart> none;
  Parse(RenderSvg(none));
}

TEST(ChartTest, HighlightedStrategyIsDrawnOnTopAndThicker) {
  std::vector<EttrObservation> obs = {{"Hyperfleet", 0, 0.9, 0.9, 0.9, true},
                                      {"Hyperfleet", 8, 0.95, 0.95, 0.95, true},
                                      {"C target", 0, 0.9, 0.9, 0.9},
                                      {"C target", 8, 0.95, 0.95, 0.95}};
  std::vector<LineChart> charts = {EttrAgainstSparesChart(obs, "")};
  auto doc = Parse(RenderSvg(charts));
  auto series = doc.select_nodes("//g[@class='series']");
  ASSERT_EQ(series.size(), 2u);
  EXPECT_STREQ(series[0].node().attribute("data-name").value(), "C target");
  EXPECT_STREQ(series[1].node().attribute("data-name").value(), "Hyperfleet");
  double thin = series[0].node().child("polyline").attribute("stroke-width").as_double();
  double thick = series[1].node().child("polyline").attribute("stroke-width").as_double();
  EXPECT_GT(thick, thin);
}

TEST(ChartTest, LongSubtitleWrapsAtSeparators) {
  LineChart chart;
  chart.title = "t";
  chart.subtitle = "N = 2,000 of F = 2,048 nodes \u00b7 3.8 failures per 1,000 node-days \u00b7 "
                   "20 replications of 54 days \u00b7 lemons on, fail-slow on \u00b7 parametric "
                   "engine \u00b7 bars: 95 % interval";
  std::vector<LineChart> charts = {chart};
  auto texts = Texts(Parse(RenderSvg(charts)));
  std::string joined;
  int lines = 0;
  for (const auto& t : texts) {
    if (chart.subtitle.find(t) != std::string::npos && t.size() > 20) {
      EXPECT_LE(t.size(), 120u) << t;
      joined += (joined.empty() ? "" : " \u00b7 ") + t;
      ++lines;
    }
  }
  EXPECT_EQ(lines, 2);
  EXPECT_EQ(joined, chart.subtitle);  // nothing lost at the break
}

TEST(NiceTicksTest, RoundStepsCoveringTheRange) {
  EXPECT_EQ(NiceTicks(0, 48), (std::vector<double>{0, 10, 20, 30, 40, 50}));
  auto t = NiceTicks(0.62, 0.985);
  ASSERT_GE(t.size(), 2u);
  EXPECT_LE(t.front(), 0.62);
  EXPECT_GE(t.back(), 0.985);
  EXPECT_NEAR(t[1] - t[0], 0.1, 1e-12);  // 0.073 a step: rounded up to 0.1
  auto same = NiceTicks(5, 5);
  EXPECT_LT(same.front(), 5);
  EXPECT_GT(same.back(), 5);
  EXPECT_EQ(NiceTicks(NAN, 1), (std::vector<double>{0, 1}));
}

}  // namespace
}  // namespace hf::sim
