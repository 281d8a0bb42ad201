// The Roofline tab's data against its sources: the roofs against the hardware YAML as written, a known
// op's point against its row of the prediction JSON, the measured joins against the compare JSON; and
// the view drawing its points, hovering and clicking them.
#include "gui/model/roofline_data.h"
#include "gui/views/roofline_view.h"

#include "cli/default_scenario.h"
#include "gui/model/document.h"

#include <QImage>
#include <QTest>

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <set>

using k3::gui::Document;
using k3::gui::RooflineData;

namespace {
const std::string kSource = K3PERF_SOURCE_DIR;
const std::string kRun = kSource + "/bench/results/2026-12-01-h200-engine-traces-9";
k3::DataPaths data() { return k3::DataPaths::under(kSource + "/scenarios"); }

nlohmann::ordered_json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::ordered_json::parse(in);
}

double bytes_of(const nlohmann::ordered_json& counts) {
  double total = 0;
  for (const auto& [unused, v] : counts.items()) total += v.get<double>();
  return total;
}

bool close(double a, double b) { return std::abs(a - b) <= 1e-9 * std::abs(b); }
}  // namespace

class RooflineTest : public QObject {
  Q_OBJECT

 private slots:
  void the_roofs_are_the_hardware_files() {
    Document d(data());
    d.open(kRun + "/pred_decode_b1_ctx8192.json");
    QVERIFY(d.hardware());
    const RooflineData r = k3::gui::roofline_data(*d.prediction(), *d.hardware(), nullptr);
    const YAML::Node gpu = YAML::LoadFile(kSource + "/scenarios/hardware/h200-sxm.yaml")["gpu"];
    QCOMPARE(r.hbm_bandwidth_bytes_per_s, gpu["hbm_bandwidth_bytes_per_s"]["value"].as<double>());
    QCOMPARE(r.compute_roofs.size(), gpu["peak_flops_per_s"].size());
    for (const auto& roof : r.compute_roofs) {
      QCOMPARE(roof.peak_flops_per_s, gpu["peak_flops_per_s"][roof.compute]["value"].as<double>());
      QVERIFY(close(roof.ridge_flops_per_byte, roof.peak_flops_per_s / r.hbm_bandwidth_bytes_per_s));
    }
    QCOMPARE(r.compute_roofs.back().compute, std::string("fp8"));  // the highest peak last
    QCOMPARE(k3::gui::rate_text(989.4e12), std::string("989 TFLOP/s"));
    QCOMPARE(k3::gui::rate_text(4.8e12, "B/s"), std::string("4.8 TB/s"));
  }

  void a_known_op_is_its_row_and_the_joins_are_the_comparisons() {
    Document d(data());
    d.open(kRun + "/pred_decode_b1_ctx8192.json");
    d.open(kRun + "/compare_decode_b1_ctx8192.json");
    QVERIFY(d.comparison());
    const RooflineData r = k3::gui::roofline_data(*d.prediction(), *d.hardware(), &*d.comparison());

    const auto pred = read_json(kRun + "/pred_decode_b1_ctx8192.json");
    const auto compare = read_json(kRun + "/compare_decode_b1_ctx8192.json");
    std::set<std::string> placed;
    int collectives = 0, zero = 0;
    for (const auto& o : pred["ops"]) {
      const double flops = o["flops"].get<double>();
      if (o["kind"] == "collective") {
        ++collectives;
      } else if (flops <= 0) {
        ++zero;
      } else {
        placed.insert(o["name"].get<std::string>());
      }
      if (o["name"] != "L001.kda.qkv_proj") continue;
      const auto it =
          std::find_if(r.points.begin(), r.points.end(), [](const auto& p) { return p.name == "L001.kda.qkv_proj"; });
      QVERIFY(it != r.points.end());
      const double bytes = bytes_of(o["read"]) + bytes_of(o["written"]);
      QVERIFY(close(it->intensity_flops_per_byte, flops / bytes));
      QVERIFY(close(it->predicted_flops_per_s, flops / (o["time_us"].get<double>() * 1e-6)));
      QCOMPARE(it->bound, o["bound"].get<std::string>());
      QVERIFY(it->predicted_percent_of_roof() > 0 && it->predicted_percent_of_roof() <= 100.0 + 1e-9);
      for (const auto& c : compare["ops"]) {
        if (c["name"] != "L001.kda.qkv_proj") continue;
        QVERIFY(it->measured_flops_per_s.has_value());
        QVERIFY(close(*it->measured_flops_per_s, c["flops"].get<double>() / (c["measured_us"].get<double>() * 1e-6)));
      }
    }
    QCOMPARE(r.collectives_left_out, collectives);
    QCOMPARE(r.zero_flop_left_out, zero);
    QCOMPARE(r.points.size(), placed.size());

    int measured = 0, joined = 0;
    for (const auto& c : compare["ops"]) {
      if (c["flops"].get<double>() <= 0 || c["measured_us"].get<double>() <= 0) continue;
      ++measured;
      joined += placed.count(c["name"].get<std::string>()) ? 1 : 0;
    }
    QCOMPARE(r.comparison_ops, measured);
    QCOMPARE(r.measured_joined, joined);
    QVERIFY(joined > 40);
    int with_measurement = 0;
    for (const auto& p : r.points) with_measurement += p.measured_flops_per_s ? 1 : 0;
    QCOMPARE(with_measurement, joined);
  }

  void the_view_draws_hovers_and_selects() {
    Document d(data());
    d.set_scenario(k3::cli::kDefaultScenarioYaml, "<default>");
    k3::gui::RooflineView view(&d);
    view.resize(1100, 750);
    view.show();
    const QImage image = view.grab().toImage();
    const RooflineData r = k3::gui::roofline_data(*d.prediction(), *d.hardware(), nullptr);
    QCOMPARE(view.point_count(), static_cast<int>(r.points.size()));
    QVERIFY2(view.caption().contains(QString("left out: %1 ops (collectives)").arg(r.collectives_left_out)),
             qPrintable(view.caption()));

    // The point of a known op is drawn where the frame puts it, in its bound's colour.
    const auto& pt = r.points[5];
    const QPointF px = view.point_px(pt.name);
    QVERIFY(view.rect().contains(px.toPoint()));
    QCOMPARE(image.pixelColor(px.toPoint()), view.bound_color(pt.bound));
    QVERIFY(view.hover_text_at(px).contains(QString::fromStdString(pt.name)));
    QVERIFY(view.hover_text_at(px).contains("% of roof"));

    QTest::mouseClick(&view, Qt::LeftButton, {}, px.toPoint());
    // A click takes the nearest point: the op or one drawn on it.
    const int op = d.prediction()->find(d.selected_op());
    QVERIFY(op >= 0);
    QVERIFY(QLineF(view.point_px(d.selected_op()), px).length() < 8);
  }
};

QTEST_MAIN(RooflineTest)
#include "roofline_test.moc"
