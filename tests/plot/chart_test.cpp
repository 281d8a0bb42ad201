// The chart's Qt-free parts: tick choice and labels on linear and log axes, colours, file formats.
#include "plot/chart.h"

#include "expect_input_error.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace k3::plot {
namespace {

void expect_ticks(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12 * std::max(1.0, want[i])) << i;
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
  EXPECT_EQ(tick_label(15000, 5000), "15K");
  EXPECT_EQ(tick_label(0, 5000), "0");
  EXPECT_EQ(tick_label(2500, 2500), "2.5K");
  EXPECT_EQ(tick_label(2e6, 1e6), "2M");
  EXPECT_EQ(tick_label(0.25, 0.05), "0.25");
  EXPECT_EQ(tick_label(40, 20), "40");
}

TEST(PlotLogTicks, PowersOfTenAndTwoAndFiveOnShortRanges) {
  expect_ticks(log_ticks(1e4, 1e9, false), {1e4, 1e5, 1e6, 1e7, 1e8, 1e9});
  expect_ticks(log_ticks(1, 100, true), {1, 2, 5, 10, 20, 50, 100});
  expect_ticks(log_ticks(3, 40, true), {5, 10, 20});  // only ticks inside the range
  expect_ticks(log_ticks(0.01, 1, false), {0.01, 0.1, 1});
}

TEST(PlotLogTicks, LabelsUseSuffixesNeverExponents) {
  std::vector<std::string> got;
  for (double v : {0.01, 0.5, 1.0, 10.0, 100.0, 1e3, 1e4, 5e4, 1e6, 2e7, 1e9, 1e12, 2e15, 1e18})
    got.push_back(log_tick_label(v));
  const std::vector<std::string> want = {"0.01", "0.5", "1",   "10", "100", "1K", "10K",
                                         "50K",  "1M",  "20M", "1G", "1T",  "2P", "1E"};
  EXPECT_EQ(got, want);
}

TEST(PlotColors, SeriesTakeTheirOwnColourOrThePalettes) {
  Chart c;
  c.series.resize(palette().size() + 1);
  c.series[1].color = "#123456";
  EXPECT_EQ(series_color(c, 0), palette()[0]);
  EXPECT_EQ(series_color(c, 1), "#123456");
  EXPECT_EQ(series_color(c, palette().size()), palette()[0]);  // repeats after the last
}

TEST(PlotFiles, RefuseAnUnknownExtension) {
  test::expect_input_error([] { write_chart(Chart{}, "plot.jpg"); }, {"plot.jpg", ".svg or .png"});
}

#ifndef K3PERF_HAVE_QT
TEST(PlotFiles, SayWhatToInstallWithoutQt) {
  for (const char* path : {"plot.svg", "plot.png"}) {
    test::expect_input_error([&] { write_chart(Chart{}, path); }, {"Qt 6", "qt6-base-dev", "qt6-svg-dev"});
  }
}
#endif

}  // namespace
}  // namespace k3::plot
