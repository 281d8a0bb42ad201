// A what-if edit on full K3, timed through the whole window: MainWindow with every view, opened on the
// embedded default scenario (K3, 93 layers, GB300 TP8 decode at 128K), then a cycle of edits (batch,
// context, TP/EP, precisions, CUDA graphs), each timed as
//   predict   Document::set_edit until the prediction is read (parse_scenario, predict, to_json, rows);
//   views     the same call including every view's slot on prediction_changed (models rebuilt);
//   repaint   the visible tab and the what-if panel painted into images afterwards;
// and, apart, a 10^4-point scatter chart through the plot painter. Medians over the edits, as JSON.
// Target (k3perf issue 26): an edit to all views updated ≤ 50 ms for full K3.
// With a trace, every edit also re-compares the prediction with it (the comparison follows the what-ifs).
//   k3perf_bench_gui_whatif [rounds] [trace.json.gz]
#include "cli/default_scenario.h"
#include "core/data_paths.h"
#include "gui/model/document.h"
#include "gui/views/main_window.h"
#include "plot/painter.h"

#include <QApplication>
#include <QImage>
#include <QPainter>
#include <QTabWidget>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

nlohmann::ordered_json stats(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return {{"median_ms", ms[ms.size() / 2]}, {"p90_ms", ms[ms.size() * 9 / 10]}, {"max_ms", ms.back()}};
}

}  // namespace

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  const int rounds = argc > 1 ? std::stoi(argv[1]) : 3;

  k3::gui::Document document(k3::DataPaths::resolve());
  document.set_scenario(k3::cli::kDefaultScenarioYaml, "<embedded default>");
  if (argc > 2) document.open(argv[2]);
  k3::gui::MainWindow window(&document);
  window.resize(1600, 1000);
  window.show();
  QApplication::processEvents();

  // Edits that each change the prediction; every one is valid for the default scenario.
  const std::vector<std::pair<std::string, std::string>> edits = {{"workload.batch", "1"},
                                                                  {"workload.batch", "64"},
                                                                  {"workload.context_tokens", "8192"},
                                                                  {"workload.context_tokens", "1000000"},
                                                                  {"precision.kv_cache", "fp8"},
                                                                  {"precision.kv_cache", "bf16"},
                                                                  {"runtime.cuda_graphs", "false"},
                                                                  {"runtime.cuda_graphs", "true"},
                                                                  {"workload.batch", "8"},
                                                                  {"workload.context_tokens", "131072"}};
  std::vector<double> predict_ms, views_ms, repaint_ms;
  QImage tab_image(1600, 1000, QImage::Format_ARGB32_Premultiplied);
  QImage panel_image(400, 1000, QImage::Format_ARGB32_Premultiplied);
  for (int round = 0; round < rounds; ++round) {
    for (int tab = 0; tab < window.tabs()->count(); ++tab) {
      window.tabs()->setCurrentIndex(tab);
      for (const auto& [key, value] : edits) {
        auto t0 = Clock::now();
        document.set_edit(key, value);
        views_ms.push_back(ms_since(t0));
        predict_ms.push_back(document.last_predict_ms());
        if (!document.error().empty()) {
          std::fprintf(stderr, "k3perf_bench_gui_whatif: %s=%s: %s\n", key.c_str(), value.c_str(),
                       document.error().c_str());
          return 1;
        }
        t0 = Clock::now();
        window.tabs()->currentWidget()->render(&tab_image);
        window.whatif()->render(&panel_image);
        repaint_ms.push_back(ms_since(t0));
      }
    }
  }

  // 10^4 points through the one painter (the roofline of a large graph, a sweep's scatter).
  k3::plot::Chart chart;
  chart.title = "10^4 points";
  chart.x_log = chart.y_log = true;
  k3::plot::Series points{"ops", {}, k3::plot::SeriesStyle::scatter};
  std::mt19937 rng(7);
  std::lognormal_distribution<double> value(3, 2);
  for (int i = 0; i < 10000; ++i) points.points.emplace_back(value(rng), value(rng) * 1e9);
  chart.series.push_back(points);
  QImage chart_image(800, 500, QImage::Format_ARGB32_Premultiplied);
  std::vector<double> chart_ms;
  for (int r = 0; r < 21; ++r) {
    chart_image.fill(Qt::white);
    QPainter painter(&chart_image);
    const auto t0 = Clock::now();
    k3::plot::paint_chart(chart, painter, QRectF(0, 0, 800, 500));
    if (r > 0) chart_ms.push_back(ms_since(t0));
  }

  nlohmann::ordered_json out;
  out["ops"] = document.prediction()->ops.size();
  out["trace"] = argc > 2 ? argv[2] : "";
  out["views"] = window.tabs()->count();
  out["edits"] = views_ms.size();
  out["predict"] = stats(predict_ms);
  out["edit_to_all_views_updated"] = stats(views_ms);
  out["repaint_visible_tab_and_panel"] = stats(repaint_ms);
  out["scatter_10k_points_paint"] = stats(chart_ms);
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
