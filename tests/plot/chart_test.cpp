// The chart library: tick choice, the pixel layout, and both writers (SVG text, PNG pixels read back).
#include "plot/chart.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace k3::plot {
namespace {

Chart two_series() {
  Chart c;
  c.title = "Pareto front";
  c.x_label = "tokens/s per GPU";
  c.y_label = "tokens/s per user";
  c.series.push_back({"H200 <tp8>", {{0, 0}, {50, 100}, {100, 40}}, SeriesStyle::line_and_markers});
  c.series.push_back({"B200", {{20, 10}, {80, 90}}, SeriesStyle::scatter});
  return c;
}

void expect_ticks(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
}

TEST(PlotTicks, CoverTheRangeAtOneTwoOrFive) {
  expect_ticks(nice_ticks(0, 100, 5), {0, 20, 40, 60, 80, 100});
  expect_ticks(nice_ticks(3, 97, 5), {0, 20, 40, 60, 80, 100});
  expect_ticks(nice_ticks(0.12, 0.31, 4), {0.1, 0.15, 0.2, 0.25, 0.3, 0.35});  // step 0.05 for a raw 0.0475
  expect_ticks(nice_ticks(-7, 7, 7), {-8, -6, -4, -2, 0, 2, 4, 6, 8});
  expect_ticks(nice_ticks(5, 5, 4), {4.5, 5, 5.5});  // a flat range widens by 10 %; raw step 0.25 -> 0.5
}

TEST(PlotTicks, LabelsAreShort) {
  EXPECT_EQ(tick_label(1500, 500), "1500");
  EXPECT_EQ(tick_label(15000, 5000), "15k");
  EXPECT_EQ(tick_label(2500, 2500), "2.5k");
  EXPECT_EQ(tick_label(2e6, 1e6), "2M");
  EXPECT_EQ(tick_label(0.25, 0.05), "0.25");
  EXPECT_EQ(tick_label(40, 20), "40");
}

TEST(PlotLayout, MapsDataOntoThePlotArea) {
  const Scene s = layout(two_series());
  EXPECT_EQ(s.x_min, 0);
  EXPECT_EQ(s.x_max, 100);
  EXPECT_EQ(s.y_min, 0);
  EXPECT_EQ(s.y_max, 100);
  EXPECT_DOUBLE_EQ(s.to_px_x(0), s.left);
  EXPECT_DOUBLE_EQ(s.to_px_x(100), s.right);
  EXPECT_DOUBLE_EQ(s.to_px_y(0), s.bottom);
  EXPECT_DOUBLE_EQ(s.to_px_y(100), s.top);
  // The line series is a polyline through its three points; markers for both series and the legend.
  ASSERT_GE(s.polylines.size(), 1u);
  EXPECT_EQ(s.polylines[0].points.size(), 3u);
  EXPECT_DOUBLE_EQ(s.polylines[0].points[1].first, s.to_px_x(50));
  EXPECT_DOUBLE_EQ(s.polylines[0].points[1].second, s.to_px_y(100));
  EXPECT_EQ(s.markers.size(), 3u + 2u + 2u);
}

TEST(PlotSvg, HasEveryLabelEscapedAndEveryPoint) {
  const std::string svg = to_svg(two_series());
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"800\" height=\"500\"", 0), 0u);
  EXPECT_NE(svg.find(">Pareto front</text>"), std::string::npos);
  EXPECT_NE(svg.find(">tokens/s per GPU</text>"), std::string::npos);
  EXPECT_NE(svg.find("rotate(-90"), std::string::npos);
  EXPECT_NE(svg.find(">H200 &lt;tp8&gt;</text>"), std::string::npos);
  const Scene s = layout(two_series());
  EXPECT_NE(svg.find(fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\"", s.to_px_x(80), s.to_px_y(90))),
            std::string::npos);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_EQ(svg, to_svg(two_series()));  // deterministic
}

TEST(PlotPng, IsAPngOfTheChartsSize) {
  if (!png_supported()) GTEST_SKIP() << "built without Qt 6 Gui";
  const std::string png = to_png(two_series());
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  // IHDR: width and height, big-endian, at bytes 16..23.
  auto be32 = [&](std::size_t at) {
    return (uint32_t(uint8_t(png[at])) << 24) | (uint32_t(uint8_t(png[at + 1])) << 16) |
           (uint32_t(uint8_t(png[at + 2])) << 8) | uint32_t(uint8_t(png[at + 3]));
  };
  EXPECT_EQ(be32(16), 800u);
  EXPECT_EQ(be32(20), 500u);
}

TEST(PlotFiles, RefuseAnUnknownExtension) { EXPECT_THROW(write_chart(two_series(), "/tmp/x.jpg"), std::exception); }

}  // namespace
}  // namespace k3::plot
