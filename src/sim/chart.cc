#include "hyperfleet/sim/chart.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <string_view>
#include <utility>

namespace hf::sim {
namespace {

// Okabe & Ito's colour-blind-safe palette (yellow left out: too pale on white); the marker
// shape changes too, so lines stay apart in grey print.
// Wine (#882255, from Paul Tol's palette) makes an eighth colour.
constexpr std::array<std::string_view, 8> kColours = {"#0072B2", "#D55E00", "#009E73",
                                                      "#CC79A7", "#E69F00", "#56B4E9",
                                                      "#000000", "#882255"};
constexpr int kMarkerShapes = 5;
constexpr std::string_view kFont = "DejaVu Sans, Helvetica, Arial, sans-serif";

/// `v` with `decimals` digits after the point, C locale (std::to_chars ignores the locale).
std::string Fixed(double v, int decimals) {
  if (std::abs(v) < 0.5 * std::pow(10.0, -decimals)) v = 0;  // no "-0.0"
  std::array<char, 64> buf{};
  auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v,
                                 std::chars_format::fixed, decimals);
  if (ec != std::errc()) return "0";
  return std::string(buf.data(), end);
}

/// The shortest text that reads back as `v` ("2.34", "16").
std::string Shortest(double v) {
  std::array<char, 64> buf{};
  auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  if (ec != std::errc()) return "0";
  return std::string(buf.data(), end);
}

/// A coordinate in user units, one decimal.
std::string Px(double v) { return Fixed(v, 1); }

/// `text` escaped for XML character data and attribute values; characters XML 1.0 forbids
/// become '?'.
std::string Escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        out += (u < 0x20 && c != '\t' && c != '\n' && c != '\r') ? '?' : c;
    }
  }
  return out;
}

/// Decimals that print every multiple of `step` exactly (0.25 -> 2, 5 -> 0), at most 6.
int DecimalsFor(double step) {
  if (!(step > 0)) return 0;
  int d = 0;
  double scaled = step;
  while (d < 6 && std::abs(scaled - std::round(scaled)) > 1e-6 * scaled) scaled *= 10, ++d;
  return d;
}

/// A linear map from a value interval to a pixel interval.
struct Scale {
  double v0 = 0, v1 = 1, p0 = 0, p1 = 1;
  double operator()(double v) const { return p0 + (v - v0) / (v1 - v0) * (p1 - p0); }
};

/// One axis: its value range and where its ticks sit, with their labels.
struct Axis {
  double low = 0, high = 1;
  std::vector<std::pair<double, std::string>> ticks;
};

bool Drawn(const ChartPoint& p) { return std::isfinite(p.x) && std::isfinite(p.y); }
bool HasBar(const ChartPoint& p) {
  return p.low && p.high && std::isfinite(*p.low) && std::isfinite(*p.high);
}

std::string TickLabel(double v, double step, bool percent) {
  if (percent) return Fixed(v * 100, DecimalsFor(step * 100)) + " %";
  return Fixed(v, DecimalsFor(step));
}

/// The y axis: fits every drawn point, bar and reference, padded by 5 %, on nice ticks,
/// then clamped to [y_floor, y_ceiling].
Axis YAxis(const LineChart& chart) {
  double lo = INFINITY, hi = -INFINITY;
  auto take = [&](double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  };
  for (const auto& s : chart.series) {
    for (const auto& p : s.points) {
      if (!Drawn(p)) continue;
      take(p.y);
      if (HasBar(p)) take(*p.low), take(*p.high);
    }
  }
  for (const auto& r : chart.references) take(r.y);
  if (lo > hi) lo = chart.y_floor.value_or(0), hi = chart.y_ceiling.value_or(1);
  double pad = (hi - lo) * 0.05;
  std::vector<double> ticks = NiceTicks(lo - pad, hi + pad, 7);
  Axis axis{ticks.front(), ticks.back(), {}};
  if (chart.y_floor && axis.low < *chart.y_floor && *chart.y_floor < axis.high) {
    axis.low = *chart.y_floor;
  }
  if (chart.y_ceiling && axis.high > *chart.y_ceiling && *chart.y_ceiling > axis.low) {
    axis.high = *chart.y_ceiling;
  }
  double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1;
  double eps = step * 1e-6;
  for (double t : ticks) {
    if (t >= axis.low - eps && t <= axis.high + eps) {
      axis.ticks.emplace_back(t, TickLabel(t, step, chart.y_percent));
    }
  }
  return axis;
}

/// The x axis: nice ticks over the drawn points' x; with `at_data`, ticks at the distinct
/// x values instead (spare counts, the swept rates) unless two would be closer than 30 px.
Axis XAxis(const LineChart& chart, bool at_data, double width_px) {
  std::vector<double> xs;
  for (const auto& s : chart.series) {
    for (const auto& p : s.points) {
      if (Drawn(p)) xs.push_back(p.x);
    }
  }
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  std::vector<double> ticks = xs.empty() ? NiceTicks(0, 1) : NiceTicks(xs.front(), xs.back());
  Axis axis{ticks.front(), ticks.back(), {}};
  if (at_data && xs.size() >= 2 && xs.size() <= 16) {
    double min_gap = INFINITY;
    for (size_t i = 1; i < xs.size(); ++i) min_gap = std::min(min_gap, xs[i] - xs[i - 1]);
    if (min_gap / (xs.back() - xs.front()) * width_px >= 30) {
      axis.low = xs.front(), axis.high = xs.back();
      for (double x : xs) axis.ticks.emplace_back(x, Shortest(x));
      return axis;
    }
  }
  double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1;
  for (double t : ticks) axis.ticks.emplace_back(t, Fixed(t, DecimalsFor(step)));
  return axis;
}

/// Marker `shape` centred on (x, y), filled with `colour`; `tip` (when not empty) becomes its
/// hover title.
std::string Marker(int shape, double x, double y, std::string_view colour,
                   std::string_view tip = {}) {
  std::string tag, geometry;
  switch (shape) {
    case 0:
      tag = "circle";
      geometry = "cx=\"" + Px(x) + "\" cy=\"" + Px(y) + "\" r=\"4.5\"";
      break;
    case 1:
      tag = "rect";
      geometry = "x=\"" + Px(x - 4) + "\" y=\"" + Px(y - 4) + "\" width=\"8\" height=\"8\"";
      break;
    case 2:  // triangle up
      tag = "path";
      geometry = "d=\"M" + Px(x) + " " + Px(y - 5.5) + "L" + Px(x + 5) + " " + Px(y + 4) + "L" +
                 Px(x - 5) + " " + Px(y + 4) + "Z\"";
      break;
    case 3:  // diamond
      tag = "path";
      geometry = "d=\"M" + Px(x) + " " + Px(y - 5.5) + "L" + Px(x + 5.5) + " " + Px(y) + "L" +
                 Px(x) + " " + Px(y + 5.5) + "L" + Px(x - 5.5) + " " + Px(y) + "Z\"";
      break;
    default:  // triangle down
      tag = "path";
      geometry = "d=\"M" + Px(x) + " " + Px(y + 5.5) + "L" + Px(x + 5) + " " + Px(y - 4) + "L" +
                 Px(x - 5) + " " + Px(y - 4) + "Z\"";
  }
  std::string out = "<" + tag + " class=\"marker\" " + geometry + " fill=\"" +
                    std::string(colour) + "\" stroke=\"#ffffff\" stroke-width=\"1.2\"";
  if (tip.empty()) return out + "/>";
  return out + "><title>" + Escape(tip) + "</title></" + tag + ">";
}

/// Pixel box of a chart's plot area.
struct Frame {
  double left, top, right, bottom;
};

/// Grid, axes, ticks and axis labels.
void DrawAxes(std::string& out, const LineChart& chart, const Frame& f, const Axis& xa,
              const Axis& ya, const Scale& sx, const Scale& sy) {
  out += "<g stroke=\"#e3e3e3\" stroke-width=\"1\">";
  for (const auto& [v, label] : ya.ticks) {
    out += "<path d=\"M" + Px(f.left) + " " + Px(sy(v)) + "H" + Px(f.right) + "\"/>";
  }
  for (const auto& [v, label] : xa.ticks) {
    out += "<path d=\"M" + Px(sx(v)) + " " + Px(f.top) + "V" + Px(f.bottom) + "\"/>";
  }
  out += "</g>\n<path d=\"M" + Px(f.left) + " " + Px(f.top) + "V" + Px(f.bottom) + "H" +
         Px(f.right) + "\" fill=\"none\" stroke=\"#333333\" stroke-width=\"1.2\"/>\n";
  out += "<g font-size=\"12\" fill=\"#333333\">";
  for (const auto& [v, label] : ya.ticks) {
    out += "<text x=\"" + Px(f.left - 8) + "\" y=\"" + Px(sy(v) + 4) +
           "\" text-anchor=\"end\">" + Escape(label) + "</text>";
  }
  for (const auto& [v, label] : xa.ticks) {
    out += "<text x=\"" + Px(sx(v)) + "\" y=\"" + Px(f.bottom + 18) +
           "\" text-anchor=\"middle\">" + Escape(label) + "</text>";
  }
  out += "</g>\n<text x=\"" + Px((f.left + f.right) / 2) + "\" y=\"" + Px(f.bottom + 42) +
         "\" text-anchor=\"middle\" font-size=\"13\">" + Escape(chart.x_label) + "</text>\n";
  double mid = (f.top + f.bottom) / 2;
  out += "<text x=\"20\" y=\"" + Px(mid) + "\" transform=\"rotate(-90 20 " + Px(mid) +
         ")\" text-anchor=\"middle\" font-size=\"13\">" + Escape(chart.y_label) + "</text>\n";
}

/// One series: its line, error bars and markers (with a hover title per marker).
void DrawSeries(std::string& out, const LineChart& chart, size_t index, const Scale& sx,
                const Scale& sy) {
  const ChartSeries& s = chart.series[index];
  std::string_view colour = kColours[index % kColours.size()];
  int shape = static_cast<int>(index % kMarkerShapes);
  out += "<g class=\"series\" data-name=\"" + Escape(s.name) + "\">";
  std::string line;
  for (const auto& p : s.points) {
    if (!Drawn(p)) continue;
    line += (line.empty() ? "" : " ") + Px(sx(p.x)) + "," + Px(sy(p.y));
  }
  if (!line.empty()) {
    out += "<polyline points=\"" + line + "\" fill=\"none\" stroke=\"" + std::string(colour) +
           "\" stroke-width=\"" + (s.emphasis ? "3.6" : "2.2") +
           "\" stroke-linejoin=\"round\" stroke-linecap=\"round\"/>";
  }
  for (const auto& p : s.points) {
    if (!Drawn(p) || !HasBar(p)) continue;
    double x = sx(p.x), lo = sy(*p.low), hi = sy(*p.high);
    out += "<path class=\"bar\" d=\"M" + Px(x) + " " + Px(lo) + "V" + Px(hi) + "M" + Px(x - 4) +
           " " + Px(lo) + "H" + Px(x + 4) + "M" + Px(x - 4) + " " + Px(hi) + "H" + Px(x + 4) +
           "\" stroke=\"" + std::string(colour) + "\" stroke-width=\"1.4\" fill=\"none\"/>";
  }
  for (const auto& p : s.points) {
    if (!Drawn(p)) continue;
    std::string value = chart.y_percent ? Fixed(p.y * 100, 1) + " %" : Shortest(p.y);
    std::string tip = s.name + ": " + Shortest(p.x) + " \u2192 " + value;
    if (HasBar(p)) {
      tip += chart.y_percent
                 ? " (" + Fixed(*p.low * 100, 1) + "\u2013" + Fixed(*p.high * 100, 1) + " %)"
                 : " (" + Shortest(*p.low) + "\u2013" + Shortest(*p.high) + ")";
    }
    out += Marker(shape, sx(p.x), sy(p.y), colour, tip);
  }
  out += "</g>\n";
}

/// The legend, right of the plot: a line sample with the marker, then the name, for each
/// series; a dashed sample for each reference line (named here, not on the plot, so that no
/// label covers a line).
void DrawLegend(std::string& out, const LineChart& chart, double x, double y) {
  out += "<g font-size=\"13\" fill=\"#222222\">";
  double cy = y + 12;
  for (size_t i = 0; i < chart.series.size(); ++i, cy += 24) {
    std::string_view colour = kColours[i % kColours.size()];
    out += "<path d=\"M" + Px(x) + " " + Px(cy) + "H" + Px(x + 28) + "\" stroke=\"" +
           std::string(colour) + "\" stroke-width=\"2.2\"/>";
    out += Marker(static_cast<int>(i % kMarkerShapes), x + 14, cy, colour);
    out += "<text x=\"" + Px(x + 36) + "\" y=\"" + Px(cy + 4.5) + "\"" +
           (chart.series[i].emphasis ? " font-weight=\"bold\"" : "") + ">" +
           Escape(chart.series[i].name) + "</text>";
  }
  for (const auto& r : chart.references) {
    if (!std::isfinite(r.y)) continue;
    out += "<path d=\"M" + Px(x) + " " + Px(cy) + "H" + Px(x + 28) +
           "\" stroke=\"#777777\" stroke-width=\"1.2\" stroke-dasharray=\"6 4\"/>";
    out += "<text x=\"" + Px(x + 36) + "\" y=\"" + Px(cy + 4.5) + "\" fill=\"#555555\">" +
           Escape(r.label) + "</text>";
    cy += 24;
  }
  out += "</g>\n";
}

/// `text` in lines that fit the chart's width at 12.5 px (about 118 characters), broken after
/// " · " separators when it can be, else at a space.
std::vector<std::string> WrapSubtitle(std::string_view text) {
  constexpr size_t kFits = 118;
  std::vector<std::string> lines;
  while (text.size() > kFits) {
    size_t cut = text.rfind(" \u00b7 ", kFits);
    size_t skip = std::string_view(" \u00b7 ").size();
    if (cut == std::string_view::npos || cut == 0) {
      cut = text.rfind(' ', kFits);
      skip = 1;
    }
    if (cut == std::string_view::npos || cut == 0) break;
    lines.emplace_back(text.substr(0, cut));
    text.remove_prefix(cut + skip);
  }
  if (!text.empty() || lines.empty()) lines.emplace_back(text);
  return lines;
}

/// Chart `index` of the document, its top edge at y = `top`.
void DrawChart(std::string& out, const LineChart& chart, int index, double top) {
  size_t longest = 0;
  for (const auto& s : chart.series) longest = std::max(longest, s.name.size());
  for (const auto& r : chart.references) longest = std::max(longest, r.label.size());
  // About 7.8 px a character at 13 px (DejaVu Sans, the widest of the fonts asked for).
  double legend_w = std::clamp(60.0 + 7.8 * static_cast<double>(longest), 150.0, 340.0);
  std::vector<std::string> subtitle = WrapSubtitle(chart.subtitle);
  double head = 76 + 16.0 * static_cast<double>(subtitle.size() > 1 ? subtitle.size() - 1 : 0);
  Frame f{80, top + head, kChartWidth - legend_w - 16, top + kChartHeight - 64};
  const double inset = 12;  // keeps markers at the range's ends off the axis lines
  Axis ya = YAxis(chart);
  Axis xa = XAxis(chart, chart.x_ticks_at_data, f.right - f.left - 2 * inset);
  Scale sx{xa.low, xa.high, f.left + inset, f.right - inset};
  if (xa.high == xa.low) sx.v1 = xa.low + 1;
  Scale sy{ya.low, ya.high, f.bottom, f.top};
  std::string clip = "plot-" + std::to_string(index);

  out += "<g class=\"chart\">\n<title>" + Escape(chart.title) + "</title>\n";
  out += "<text x=\"24\" y=\"" + Px(top + 32) + "\" font-size=\"19\" font-weight=\"bold\">" +
         Escape(chart.title) + "</text>\n";
  for (size_t i = 0; i < subtitle.size(); ++i) {
    out += "<text x=\"24\" y=\"" + Px(top + 54 + 16.0 * static_cast<double>(i)) +
           "\" font-size=\"12.5\" fill=\"#555555\">" + Escape(subtitle[i]) + "</text>\n";
  }
  out += "<clipPath id=\"" + clip + "\"><rect x=\"" + Px(f.left) + "\" y=\"" + Px(f.top - 6) +
         "\" width=\"" + Px(f.right - f.left + 6) + "\" height=\"" + Px(f.bottom - f.top + 6) +
         "\"/></clipPath>\n";
  DrawAxes(out, chart, f, xa, ya, sx, sy);
  out += "<g clip-path=\"url(#" + clip + ")\">\n";
  for (const auto& r : chart.references) {
    if (!std::isfinite(r.y)) continue;
    out += "<path class=\"reference\" d=\"M" + Px(f.left) + " " + Px(sy(r.y)) + "H" +
           Px(f.right) + "\" stroke=\"#777777\" stroke-width=\"1.2\" stroke-dasharray=\"6 4\"/>\n";
  }
  // Emphasised series last, so that they lie on top.
  for (size_t i = 0; i < chart.series.size(); ++i) {
    if (!chart.series[i].emphasis) DrawSeries(out, chart, i, sx, sy);
  }
  for (size_t i = 0; i < chart.series.size(); ++i) {
    if (chart.series[i].emphasis) DrawSeries(out, chart, i, sx, sy);
  }
  out += "</g>\n";
  DrawLegend(out, chart, f.right + 24, f.top);
  out += "</g>\n";
}

/// Groups observations into one series per strategy, in order of first appearance, each
/// sorted by x.
LineChart EttrChart(std::span<const EttrObservation> observations, std::string title,
                    std::string x_label, std::string context,
                    std::vector<ChartReference> references) {
  LineChart chart;
  chart.title = std::move(title);
  chart.subtitle = std::move(context);
  chart.x_label = std::move(x_label);
  chart.y_label = "ETTR (productive time / wall time)";
  chart.y_percent = true;
  chart.y_floor = 0;
  chart.y_ceiling = 1;
  chart.x_ticks_at_data = true;
  chart.references = std::move(references);
  for (const auto& o : observations) {
    auto it = std::find_if(chart.series.begin(), chart.series.end(),
                           [&](const ChartSeries& s) { return s.name == o.strategy; });
    if (it == chart.series.end()) {
      chart.series.push_back({o.strategy, {}});
      it = chart.series.end() - 1;
    }
    it->points.push_back({o.x, o.mean, o.ci_low, o.ci_high});
    it->emphasis = it->emphasis || o.highlight;
  }
  for (auto& s : chart.series) {
    std::stable_sort(s.points.begin(), s.points.end(),
                     [](const ChartPoint& a, const ChartPoint& b) { return a.x < b.x; });
  }
  return chart;
}

}  // namespace

std::vector<double> NiceTicks(double low, double high, int target) {
  if (!std::isfinite(low) || !std::isfinite(high)) return {0, 1};
  if (low > high) std::swap(low, high);
  if (high - low < 1e-12 * std::max(1.0, std::abs(low))) {
    double half = low == 0 ? 0.5 : std::abs(low) * 0.05;
    low -= half;
    high += half;
  }
  target = std::max(target, 2);
  double raw = (high - low) / (target - 1);
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double norm = raw / mag;
  double step = (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 2.5 ? 2.5 : norm <= 5 ? 5 : 10) * mag;
  double first = std::floor(low / step + 1e-9);
  double last = std::ceil(high / step - 1e-9);
  std::vector<double> ticks;
  for (double k = first; k <= last && ticks.size() < 64; k += 1) ticks.push_back(k * step);
  if (ticks.size() < 2) ticks.push_back((last + 1) * step);
  return ticks;
}

std::string RenderSvg(std::span<const LineChart> charts) {
  int height = std::max(1, kChartHeight * static_cast<int>(charts.size()));
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" +
         std::to_string(kChartWidth) + "\" height=\"" + std::to_string(height) +
         "\" viewBox=\"0 0 " + std::to_string(kChartWidth) + " " + std::to_string(height) +
         "\" font-family=\"" + std::string(kFont) + "\">\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  for (size_t i = 0; i < charts.size(); ++i) {
    DrawChart(out, charts[i], static_cast<int>(i), static_cast<double>(kChartHeight) * i);
  }
  out += "</svg>\n";
  return out;
}

LineChart EttrAgainstSparesChart(std::span<const EttrObservation> observations,
                                 std::string context, std::vector<ChartReference> references) {
  return EttrChart(observations, "ETTR against hot spares", "hot spares (nodes)",
                   std::move(context), std::move(references));
}

LineChart EttrAgainstFailureRateChart(std::span<const EttrObservation> observations,
                                      std::string context,
                                      std::vector<ChartReference> references) {
  return EttrChart(observations, "ETTR against failure rate",
                   "unexpected failures per 1,000 node-days (fleet average)", std::move(context),
                   std::move(references));
}

}  // namespace hf::sim
