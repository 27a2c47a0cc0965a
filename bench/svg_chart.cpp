#include "bench/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace lazycl::bench {
namespace {

constexpr double kWidth = 820, kHeight = 520;
constexpr double kLeft = 110, kRight = 230, kTop = 50, kBottom = 70;

struct Style {
  const char* color;
  const char* dash;
  double width;
};
// Lines may coincide (for_loop and scan_placeholder move the same bytes), so each series gets
// its own colour, dash pattern and width: a wide line under a narrow one stays visible.
constexpr Style kStyles[] = {
    {"#1f77b4", "", 7}, {"#d62728", "", 2.5}, {"#2ca02c", "8 5", 2.5}, {"#9467bd", "2 4", 2.5}};

std::string Bytes(double v) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return absl::StrFormat(v < 10 && v != std::floor(v) ? "%.1f %s" : "%.0f %s", v, units[u]);
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else if (c == '&') {
      out += "&amp;";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string RenderSvg(const Chart& chart) {
  double x_min = std::numeric_limits<double>::max(), x_max = 0;
  double y_min = std::numeric_limits<double>::max(), y_max = 0;
  for (const Series& s : chart.series) {
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (s.x[i] <= 0 || s.y[i] <= 0) continue;
      x_min = std::min(x_min, s.x[i]);
      x_max = std::max(x_max, s.x[i]);
      y_min = std::min(y_min, s.y[i]);
      y_max = std::max(y_max, s.y[i]);
    }
  }
  if (x_max == 0) x_min = x_max = y_min = y_max = 1;
  // Whole powers of two around the data, at least one decade apart.
  const double lx0 = std::floor(std::log2(x_min)),
               lx1 = std::max(std::ceil(std::log2(x_max)), lx0 + 1);
  const double ly0 = std::floor(std::log2(y_min)),
               ly1 = std::max(std::ceil(std::log2(y_max)), ly0 + 1);
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (std::log2(x) - lx0) / (lx1 - lx0) * plot_w; };
  auto py = [&](double y) { return kTop + plot_h - (std::log2(y) - ly0) / (ly1 - ly0) * plot_h; };

  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "font-family=\"sans-serif\" "
      "font-size=\"13\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      kWidth, kHeight);
  absl::StrAppend(
      &svg,
      absl::StrFormat("<text x=\"%.0f\" y=\"28\" font-size=\"16\" font-weight=\"bold\">%s</text>\n",
                      kLeft, Escape(chart.title)));
  // Grid and ticks: every power of two, labelled every other one when crowded.
  const int x_step = lx1 - lx0 > 8 ? 2 : 1, y_step = ly1 - ly0 > 8 ? 2 : 1;
  for (double e = lx0; e <= lx1; e += x_step) {
    const double x = px(std::exp2(e));
    absl::StrAppend(
        &svg,
        absl::StrFormat("<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#ddd\"/>\n",
                        x, kTop, x, kTop + plot_h));
    absl::StrAppend(
        &svg, absl::StrFormat("<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n", x,
                              kTop + plot_h + 18, Bytes(std::exp2(e))));
  }
  for (double e = ly0; e <= ly1; e += y_step) {
    const double y = py(std::exp2(e));
    absl::StrAppend(
        &svg,
        absl::StrFormat("<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                        kLeft, y, kLeft + plot_w, y));
    absl::StrAppend(&svg,
                    absl::StrFormat("<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                                    kLeft - 8, y + 4, Bytes(std::exp2(e))));
  }
  absl::StrAppend(
      &svg,
      absl::StrFormat("<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
                      "stroke=\"#333\"/>\n",
                      kLeft, kTop, plot_w, plot_h));
  absl::StrAppend(&svg,
                  absl::StrFormat("<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n",
                                  kLeft + plot_w / 2, kHeight - 20, Escape(chart.x_label)));
  absl::StrAppend(
      &svg,
      absl::StrFormat("<text transform=\"translate(22,%.0f) rotate(-90)\" text-anchor=\"middle\">%s"
                      "</text>\n",
                      kTop + plot_h / 2, Escape(chart.y_label)));
  for (size_t k = 0; k < chart.series.size(); ++k) {
    const Series& s = chart.series[k];
    const Style& style = kStyles[k % std::size(kStyles)];
    std::vector<std::pair<double, double>> xy;
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (s.x[i] > 0 && s.y[i] > 0) xy.push_back({s.x[i], s.y[i]});
    }
    std::sort(xy.begin(), xy.end());
    std::string points;
    for (const auto& [x, y] : xy) {
      absl::StrAppend(&points, absl::StrFormat("%.1f,%.1f ", px(x), py(y)));
      absl::StrAppend(
          &svg, absl::StrFormat("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\"/>\n", px(x),
                                py(y), style.width / 2 + 2, style.color));
    }
    absl::StrAppend(
        &svg,
        absl::StrFormat("<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" "
                        "stroke-dasharray=\"%s\" stroke-opacity=\"0.85\"/>\n",
                        points, style.color, style.width, style.dash));
    const double ly = kTop + 20 + 24 * static_cast<double>(k);
    const double lx = kLeft + plot_w + 15;
    absl::StrAppend(
        &svg, absl::StrFormat("<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
                              "stroke-width=\"%.1f\" stroke-dasharray=\"%s\"/>\n",
                              lx, ly, lx + 30, ly, style.color, style.width, style.dash));
    absl::StrAppend(&svg, absl::StrFormat("<text x=\"%.0f\" y=\"%.0f\">%s</text>\n", lx + 38,
                                          ly + 4, Escape(s.name)));
  }
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

}  // namespace lazycl::bench
