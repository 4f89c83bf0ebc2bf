#pragma once
// The simulator's pictures: a dependency-free SVG line chart writer and the two report
// figures built with it (ETTR against hot spares, ETTR against the failure rate, one line
// per strategy). Pure: values in, SVG text out (docs/simulator.md "Charts").
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace hf::sim {

/// One point of a series. `low`/`high`, when both are set, draw an error bar (the report's
/// 95 % interval of the mean). Points with a non-finite coordinate are not drawn.
struct ChartPoint {
  double x = 0;
  double y = 0;
  std::optional<double> low = std::nullopt;
  std::optional<double> high = std::nullopt;
};

/// One line: drawn in its own colour and marker shape, named in the legend.
struct ChartSeries {
  std::string name;
  std::vector<ChartPoint> points;  // drawn in the order given (sort by x for a line)
  bool emphasis = false;  // a thicker line drawn over the others, its legend entry bold
};

/// A dashed horizontal line across the plot, e.g. a published anchor ("ByteRobust 97 %").
struct ChartReference {
  double y = 0;
  std::string label;
};

/// A line chart. The y range fits every drawn point, error bar and reference (padded, on
/// round ticks) but never leaves [y_floor, y_ceiling] when those are set.
struct LineChart {
  std::string title;
  std::string subtitle;  // context under the title; long ones wrap after " · " separators
  std::string x_label;
  std::string y_label;
  bool y_percent = false;  // y values are fractions; ticks read "95 %"
  bool x_ticks_at_data = false;  // x ticks at the points' distinct x (unless too close)
  std::optional<double> y_floor;
  std::optional<double> y_ceiling;
  std::vector<ChartSeries> series;
  std::vector<ChartReference> references;
};

/// Width and height in SVG user units (pixels) of one chart drawn by RenderSvg.
inline constexpr int kChartWidth = 880;
inline constexpr int kChartHeight = 460;

/// A standalone SVG 1.1 document (UTF-8, text XML-escaped) with the charts stacked top to
/// bottom, kChartWidth wide and kChartHeight tall each; nothing drawn but axes for a chart
/// without points. Numbers are written in the C locale whatever the process's.
std::string RenderSvg(std::span<const LineChart> charts);

/// Round tick values (1, 2, 2.5 or 5 times a power of ten) covering [low, high], about `target`
/// of them; the first is <= low and the last >= high. low == high gets a range around it.
std::vector<double> NiceTicks(double low, double high, int target = 6);

/// One strategy's ETTR at one x (spare count or failure rate): the mean over replications
/// and its 95 % interval, all as fractions of wall time.
struct EttrObservation {
  std::string strategy;
  double x = 0;
  double mean = 0;
  double ci_low = 0;
  double ci_high = 0;
  bool highlight = false;  // the strategy's line is emphasised (e.g. the product's own)
};

/// The report figure "ETTR against hot spares": one line per strategy (in order of first
/// appearance), x = spares, y = ETTR in percent with 95 % bars; `context` becomes the
/// subtitle. `references` adds published anchors.
LineChart EttrAgainstSparesChart(std::span<const EttrObservation> observations,
                                 std::string context,
                                 std::vector<ChartReference> references = {});

/// The report figure "ETTR against failure rate": as EttrAgainstSparesChart with x = the
/// fleet-average unexpected failure rate per 1,000 node-days.
LineChart EttrAgainstFailureRateChart(std::span<const EttrObservation> observations,
                                      std::string context,
                                      std::vector<ChartReference> references = {});

}  // namespace hf::sim
