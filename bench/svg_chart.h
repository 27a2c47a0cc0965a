#pragma once

#include <string>
#include <vector>

// A minimal line chart as SVG text: log-scaled axes, one polyline per series, a legend.
namespace lazycl::bench {

struct Series {
  std::string name;
  std::vector<double> x;
  std::vector<double> y;
};

struct Chart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<Series> series;
};

// Points with x or y <= 0 are dropped (log axes). Values are formatted as bytes (KiB, MiB).
std::string RenderSvg(const Chart& chart);

}  // namespace lazycl::bench
