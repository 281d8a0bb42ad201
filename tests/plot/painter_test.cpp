// The painter's layout (ticks inside the range, no two texts colliding, the legend off the data, marker
// labels apart), the SVG as XML with the chart's texts, the PNG decoded, and the time of 10^4 points.
#ifdef K3PERF_HAVE_QT
#include "plot/painter.h"

#include <gtest/gtest.h>
#include <QColor>
#include <QGuiApplication>
#include <QImage>
#include <QPainter>
#include <QXmlStreamReader>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

namespace k3::plot {
namespace {

// Fonts need a QGuiApplication; the offscreen platform needs no display.
class QtEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    setenv("QT_QPA_PLATFORM", "offscreen", 0);
    app_ = new QGuiApplication(argc_, argv_);
  }
  void TearDown() override { delete app_; }

 private:
  int argc_ = 1;
  char name_[16] = "plot_tests";
  char* argv_[2] = {name_, nullptr};
  QGuiApplication* app_ = nullptr;
};
const auto* const kQt = ::testing::AddGlobalTestEnvironment(new QtEnvironment);

Chart two_series() {
  Chart c;
  c.title = "Pareto front";
  c.x_label = "tokens/s per GPU";
  c.y_label = "tokens/s per user";
  c.series.push_back({"H200 <tp8>", {{0, 0}, {50, 100}, {100, 40}}, SeriesStyle::line_and_markers});
  c.series.push_back({"B200", {{20, 10}, {80, 90}}, SeriesStyle::scatter});
  return c;
}

// A hit-rate curve as `k3perf cache --curve` draws it: log x from 1e4 to 1e9 tokens, y fixed at 0..100 %.
Chart log_curve() {
  Chart c;
  c.title = "Token hit rate vs hbm capacity";
  c.x_label = "capacity (tokens of KV)";
  c.y_label = "token hit rate (%)";
  c.x_log = true;
  c.y_range = AxisRange{0, 100};
  Series s{"hybrid", {}, SeriesStyle::line_and_markers};
  for (int k = 4; k <= 9; ++k) s.points.emplace_back(std::pow(10.0, k), 10.0 * (k - 3));
  c.series = {s};
  return c;
}

// Data over the whole plot area: no corner is free for the legend.
Chart dense_scatter(int points) {
  Chart c;
  c.title = "dense";
  c.x_label = "x";
  c.y_label = "y";
  Series s{"points", {}, SeriesStyle::scatter};
  for (int i = 0; i < points; ++i) {
    s.points.emplace_back(std::fmod(i * 0.6180339887, 1.0) * 100, std::fmod(i * 0.7548776662, 1.0) * 100);
  }
  c.series = {s};
  return c;
}

ChartFrame lay_out(const Chart& c, double width, double height) {
  QImage image(int(width), int(height), QImage::Format_ARGB32);
  QPainter painter(&image);
  return layout_chart(c, painter, QRectF(0, 0, width, height));
}

std::string rect_text(const QRectF& r) {
  return std::to_string(r.x()) + "," + std::to_string(r.y()) + " " + std::to_string(r.width()) + "x" +
         std::to_string(r.height());
}

// Properties every layout must have, whatever the chart.
void expect_clean_layout(const Chart& c, const ChartFrame& f) {
  for (double t : f.x_ticks) {
    EXPECT_GE(t, f.x_min * (1 - 1e-9) - 1e-9);
    EXPECT_LE(t, f.x_max * (1 + 1e-9) + 1e-9);
  }
  for (double t : f.y_ticks) {
    EXPECT_GE(t, f.y_min * (1 - 1e-9) - 1e-9);
    EXPECT_LE(t, f.y_max * (1 + 1e-9) + 1e-9);
  }
  EXPECT_GE(f.x_labels.size(), 2u);
  EXPECT_GE(f.y_labels.size(), 2u);
  // Every text box: inside the chart, and apart from every other.
  std::vector<std::pair<std::string, QRectF>> texts;
  for (const TickLabel& l : f.x_labels) texts.emplace_back("x tick " + l.text, l.rect);
  for (const TickLabel& l : f.y_labels) texts.emplace_back("y tick " + l.text, l.rect);
  if (!c.title.empty()) texts.emplace_back("title", f.title_rect);
  if (!c.x_label.empty()) texts.emplace_back("x title", f.x_title_rect);
  if (!c.y_label.empty()) texts.emplace_back("y title", f.y_title_rect);
  if (!f.legend_rect.isEmpty()) texts.emplace_back("legend", f.legend_rect);
  for (std::size_t i = 0; i < f.marker_label_rects.size(); ++i) {
    texts.emplace_back("marker " + c.markers[i].label, f.marker_label_rects[i]);
  }
  for (std::size_t i = 0; i < texts.size(); ++i) {
    EXPECT_TRUE(f.area.contains(texts[i].second)) << texts[i].first << " " << rect_text(texts[i].second);
    for (std::size_t j = i + 1; j < texts.size(); ++j) {
      EXPECT_FALSE(texts[i].second.intersects(texts[j].second))
          << texts[i].first << " " << rect_text(texts[i].second) << " overlaps " << texts[j].first << " "
          << rect_text(texts[j].second);
    }
  }
  // No data point's pixel under the legend.
  for (const Series& s : c.series) {
    for (auto [x, y] : s.points) {
      if (!f.drawable(x, y)) continue;
      EXPECT_FALSE(f.legend_rect.contains(f.to_px(x, y))) << x << ", " << y;
    }
  }
}

std::vector<std::string> texts_of(const std::vector<TickLabel>& labels) {
  std::vector<std::string> out;
  for (const TickLabel& l : labels) out.push_back(l.text);
  return out;
}

TEST(PlotLayout, MapsDataOntoThePlotArea) {
  const ChartFrame f = lay_out(two_series(), 800, 500);
  EXPECT_EQ(f.x_min, 0);
  EXPECT_EQ(f.x_max, 100);
  EXPECT_EQ(f.y_min, 0);
  EXPECT_EQ(f.y_max, 100);
  EXPECT_DOUBLE_EQ(f.to_px(0, 0).x(), f.plot_area.left());
  EXPECT_DOUBLE_EQ(f.to_px(0, 0).y(), f.plot_area.bottom());
  EXPECT_DOUBLE_EQ(f.to_px(100, 100).x(), f.plot_area.right());
  EXPECT_DOUBLE_EQ(f.to_px(100, 100).y(), f.plot_area.top());
  const auto [x, y] = f.to_data(f.to_px(37, 81));
  EXPECT_NEAR(x, 37, 1e-9);
  EXPECT_NEAR(y, 81, 1e-9);
  expect_clean_layout(two_series(), f);
}

TEST(PlotLayout, LogAxisLabelsPowersOfTenWithSuffixes) {
  const ChartFrame f = lay_out(log_curve(), 800, 500);
  EXPECT_DOUBLE_EQ(f.x_min, 1e4);
  EXPECT_DOUBLE_EQ(f.x_max, 1e9);
  EXPECT_EQ(texts_of(f.x_labels), (std::vector<std::string>{"10K", "100K", "1M", "10M", "100M", "1G"}));
  EXPECT_EQ(f.y_min, 0);  // the fixed range
  EXPECT_EQ(f.y_max, 100);
  // Equal ratios are equal distances.
  EXPECT_NEAR(f.to_px(1e5, 0).x() - f.to_px(1e4, 0).x(), f.to_px(1e9, 0).x() - f.to_px(1e8, 0).x(), 1e-9);
  const auto [x, y] = f.to_data(f.to_px(3e6, 50));
  EXPECT_NEAR(x, 3e6, 1e-3);
  EXPECT_NEAR(y, 50, 1e-9);
  expect_clean_layout(log_curve(), f);
}

TEST(PlotLayout, ShortLogRangesGetTwosAndFives) {
  Chart c;
  c.x_log = true;
  c.series = {{"speedup", {{1, 1.0}, {2, 1.3}, {8, 1.6}, {64, 1.2}}, SeriesStyle::line_and_markers}};
  const ChartFrame f = lay_out(c, 800, 500);
  EXPECT_EQ(texts_of(f.x_labels), (std::vector<std::string>{"1", "2", "5", "10", "20", "50", "100"}));
  // In a narrow chart the 2s and 5s stay as grid lines but lose their labels.
  const ChartFrame narrow = lay_out(c, 200, 200);
  EXPECT_EQ(narrow.x_ticks.size(), 7u);
  EXPECT_EQ(texts_of(narrow.x_labels), (std::vector<std::string>{"1", "10", "100"}));
  expect_clean_layout(c, narrow);
}

TEST(PlotLayout, TickLabelsThinOutInASmallChart) {
  Chart c = two_series();
  c.series[0].points.emplace_back(123456, 98765);
  for (auto [w, h] : {std::pair{800.0, 500.0}, {400.0, 250.0}, {220.0, 160.0}}) {
    const ChartFrame f = lay_out(c, w, h);
    EXPECT_LE(f.x_labels.size(), f.x_ticks.size());
    expect_clean_layout(c, f);
  }
}

TEST(PlotLegend, TakesAFreeCornerOrGoesOutside) {
  Chart c;
  c.series = {{"rising", {{0, 0}, {50, 50}, {100, 100}}, SeriesStyle::line_and_markers}};
  // The line leaves the top-left and bottom-right corners free; top right is taken.
  const ChartFrame f = lay_out(c, 800, 500);
  EXPECT_FALSE(f.legend_outside);
  EXPECT_LT(f.legend_rect.center().x(), f.plot_area.center().x());
  EXPECT_LT(f.legend_rect.center().y(), f.plot_area.center().y());
  expect_clean_layout(c, f);

  const Chart dense = dense_scatter(2000);
  const ChartFrame g = lay_out(dense, 800, 500);
  EXPECT_TRUE(g.legend_outside);
  EXPECT_FALSE(g.legend_rect.intersects(g.plot_area));
  expect_clean_layout(dense, g);
}

TEST(PlotMarkers, LabelsStayApartAndOffTheLegend) {
  Chart c = log_curve();
  c.markers = {{1e6, 30, "hybrid wins from 1000000 tokens"},
               {1.2e6, 31, "all-MLA wins from 1200000 tokens"},
               {1e9, 60, "the end"}};
  const ChartFrame f = lay_out(c, 800, 500);
  ASSERT_EQ(f.marker_label_rects.size(), 3u);
  for (const QRectF& r : f.marker_label_rects) EXPECT_TRUE(f.plot_area.contains(r)) << rect_text(r);
  expect_clean_layout(c, f);
}

TEST(PlotSvg, IsValidXmlWithTheChartsTexts) {
  Chart c = log_curve();
  c.series.push_back({"KV <only> & more", {{1e4, 5}, {1e9, 95}}, SeriesStyle::line});
  c.markers = {{1e6, 30, "crossing"}};
  const std::string svg = to_svg(c);
  QXmlStreamReader xml(QByteArray::fromStdString(svg));
  std::vector<std::string> texts;
  QString root, width, height;
  while (!xml.atEnd()) {
    if (xml.readNext() != QXmlStreamReader::StartElement) continue;
    if (root.isEmpty()) {
      root = xml.name().toString();
      width = xml.attributes().value("width").toString();
      height = xml.attributes().value("height").toString();
    }
    if (xml.name() == QLatin1String("text")) texts.push_back(xml.readElementText().trimmed().toStdString());
  }
  ASSERT_FALSE(xml.hasError()) << xml.errorString().toStdString();
  EXPECT_EQ(root, "svg");
  EXPECT_TRUE(width.startsWith("211") || width.startsWith("800")) << width.toStdString();  // mm or px by Qt
  auto has = [&](const std::string& t) { return std::find(texts.begin(), texts.end(), t) != texts.end(); };
  for (const char* want : {"Token hit rate vs hbm capacity", "capacity (tokens of KV)", "token hit rate (%)", "hybrid",
                           "KV <only> & more", "crossing", "10K", "1G", "0", "100"}) {
    EXPECT_TRUE(has(want)) << "no <text> '" << want << "' in the SVG";
  }
  EXPECT_EQ(svg, to_svg(c));  // deterministic
}

TEST(PlotPng, DecodesAtTheChartsSizeWithTheSeriesColours) {
  const Chart c = two_series();
  const std::string png = to_png(c);
  QImage image;
  ASSERT_TRUE(image.loadFromData(QByteArray::fromStdString(png), "PNG"));
  EXPECT_EQ(image.width(), 800);
  EXPECT_EQ(image.height(), 500);
  int not_white = 0, first_colour = 0, second_colour = 0;
  const QColor first(QString::fromStdString(series_color(c, 0))), second(QString::fromStdString(series_color(c, 1)));
  for (int y = 0; y < image.height(); ++y) {
    for (int x = 0; x < image.width(); ++x) {
      const QRgb p = image.pixel(x, y);
      not_white += p != qRgb(255, 255, 255);
      first_colour += p == first.rgb();
      second_colour += p == second.rgb();
    }
  }
  EXPECT_GT(not_white, 800 * 500 / 100);  // axes, grid, texts and data: more than 1 %
  EXPECT_GT(first_colour, 50);            // the line's pixels
  EXPECT_GT(second_colour, 20);           // the two scatter dots
}

}  // namespace
}  // namespace k3::plot
#endif
