// The Compare models and view against the comparison JSON they read: every row checked as text against
// numbers the test computes from the raw JSON itself (error µs = predicted − measured, per-kind sums over
// the ops of that kind, per-step sums over the ops' measured_us_by_step), the counters joined as the
// libraries join them, and the view following the Document's selection.
#include "profiler/compare/compare.h"
#include "core/data_paths.h"
#include "core/error.h"
#include "core/hardware.h"
#include "gui/model/compare_data.h"
#include "gui/model/compare_format.h"
#include "gui/model/compare_group_model.h"
#include "gui/model/compare_leftover_model.h"
#include "gui/model/compare_op_model.h"
#include "gui/model/compare_summary.h"
#include "gui/model/document.h"
#include "gui/views/compare_view.h"
#include "profiler/compare/prediction_file.h"
#include "profiler/counters/compare_counters.h"
#include "profiler/trace/chrome_json.h"

#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QImage>
#include <QLineEdit>
#include <QTableView>
#include <QTest>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

using k3::gui::CompareData;
using k3::gui::CompareGroupModel;
using k3::gui::CompareLeftoverModel;
using k3::gui::CompareOpModel;
using k3::gui::CompareOpProxy;
using Json = nlohmann::ordered_json;

namespace {
const std::string kSource = K3PERF_SOURCE_DIR;
const std::string kRun = kSource + "/bench/results/2026-12-01-h200-engine-traces-9";
const std::string kCountersRun = kSource + "/bench/results/2026-11-30-h200-engine-traces-3";
k3::DataPaths data() { return k3::DataPaths::under(kSource + "/scenarios"); }

Json read_json(const std::string& path) {
  std::ifstream in(path);
  return Json::parse(in);
}

Json decode_8k() { return read_json(kRun + "/compare_decode_b1_ctx8192.json"); }

std::shared_ptr<const CompareData> parsed(const Json& j) {
  return std::make_shared<const CompareData>(k3::gui::compare_from_json(j, "test"));
}

// The model's text in `row`, `column`.
QString text(const QAbstractItemModel& m, int row, int column) { return m.index(row, column).data().toString(); }

// The test's own formatting: fixed decimals, an explicit sign, U+2212 for minus.
QString signed_text(double v, int decimals) {
  std::string s = fmt::format("{:+.{}f}", v, decimals);
  if (std::stod(s) == 0) s = fmt::format("{:.{}f}", std::fabs(v), decimals);
  if (s[0] == '-') return QString(QChar(0x2212)) + QString::fromStdString(s.substr(1));
  return QString::fromStdString(s);
}

double number_in(const QString& s) {
  QString t = s;
  return t.replace(QChar(0x2212), '-').toDouble();
}

// A comparison with counters, as `k3perf compare --trace T --counters C --json` writes it.
Json with_counters() {
  const k3::profiler::PredictionFile prediction =
      k3::profiler::load_prediction(kCountersRun + "/pred_counters_b1.json");
  const k3::profiler::Trace trace = k3::profiler::read_trace(kCountersRun + "/trace_decode_b1_ctx8192.json.gz");
  const k3::Hardware hw = k3::load_hardware_by_name("h200-sxm", data().hardware_dir);
  Json j = k3::profiler::to_json(k3::profiler::compare(prediction, trace, hw));
  j["counters"] = k3::profiler::to_json(k3::profiler::compare_counters(
      prediction, k3::profiler::read_range_counters(kCountersRun + "/counters_b1.json")));
  return j;
}

// The share of pixels that differ from the top-left one: 0 for a blank image.
double drawn_share(const QImage& image) {
  const QRgb background = image.pixel(0, 0);
  long long differ = 0;
  for (int y = 0; y < image.height(); y += 2) {
    for (int x = 0; x < image.width(); x += 2) differ += image.pixel(x, y) != background;
  }
  return static_cast<double>(differ) / ((image.width() / 2) * (image.height() / 2));
}
}  // namespace

class CompareTest : public QObject {
  Q_OBJECT

 private slots:
  void op_rows_are_the_jsons_ops() {
    const Json raw = decode_8k();
    CompareOpModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.set_comparison(parsed(raw));
    QCOMPARE(model.rowCount(), static_cast<int>(raw["ops"].size()));
    QCOMPARE(model.column_of(CompareOpModel::Column::measured_dram_mb), -1);  // no counters in this file
    const int name = model.column_of(CompareOpModel::Column::name);
    const int error_us = model.column_of(CompareOpModel::Column::error_us);
    const int error_percent = model.column_of(CompareOpModel::Column::error_percent);
    const int gbps = model.column_of(CompareOpModel::Column::achieved_gb_per_s);
    const int roofline = model.column_of(CompareOpModel::Column::roofline_percent);
    for (int r = 0; r < model.rowCount(); ++r) {
      const Json& o = raw["ops"][static_cast<std::size_t>(r)];
      QCOMPARE(text(model, r, name), QString::fromStdString(o["name"].get<std::string>()));
      QCOMPARE(text(model, r, error_us),
               signed_text(o["predicted_us"].get<double>() - o["measured_us"].get<double>(), 2));
      QCOMPARE(text(model, r, error_percent), signed_text(o["error_percent"].get<double>(), 1));
      QCOMPARE(text(model, r, gbps), QString::fromStdString(fmt::format(
                                         "{:.1f}", o["bytes"].get<double>() / o["measured_us"].get<double>() / 1e3)));
      const QString expected_roofline =
          o["roofline_percent"].is_null()
              ? QString("—")
              : QString::fromStdString(fmt::format("{:.1f}", o["roofline_percent"].get<double>()));
      QCOMPARE(text(model, r, roofline), expected_roofline);
    }
    QCOMPARE(model.headerData(error_us, Qt::Horizontal).toString(), QString("error µs"));
  }

  void ranks_by_abs_error_us_then_percent_and_filters() {
    const Json raw = decode_8k();
    CompareOpModel model;
    CompareOpProxy proxy(&model);
    QAbstractItemModelTester tester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.set_comparison(parsed(raw));
    std::vector<std::pair<double, std::string>> by_us, by_percent;
    for (const Json& o : raw["ops"]) {
      const std::string n = o["name"];
      by_us.push_back({std::fabs(o["predicted_us"].get<double>() - o["measured_us"].get<double>()), n});
      by_percent.push_back({std::fabs(o["error_percent"].get<double>()), n});
    }
    std::sort(by_us.rbegin(), by_us.rend());
    std::sort(by_percent.rbegin(), by_percent.rend());
    QCOMPARE(proxy.rowCount(), model.rowCount());
    for (int r = 0; r < 10; ++r) QCOMPARE(text(proxy, r, 0).toStdString(), by_us[static_cast<std::size_t>(r)].second);
    QCOMPARE(text(proxy, 0, 0), QString("head.lm_head"));
    proxy.rank_by(CompareOpProxy::Rank::abs_error_percent);
    for (int r = 0; r < 10; ++r) {
      QCOMPARE(text(proxy, r, 0).toStdString(), by_percent[static_cast<std::size_t>(r)].second);
    }
    proxy.set_filter_text("ROUTER");  // the kind, case-insensitively
    int routers = 0;
    for (const Json& o : raw["ops"]) routers += o["kind"] == "router";
    QCOMPARE(routers, 3);
    QCOMPARE(proxy.rowCount(), routers);
    proxy.set_filter_text("L002.");
    int layer2 = 0;
    for (const Json& o : raw["ops"]) layer2 += o["name"].get<std::string>().rfind("L002.", 0) == 0;
    QCOMPARE(proxy.rowCount(), layer2);
  }

  void per_kind_sums_are_the_sums_over_the_ops_of_that_kind() {
    const Json raw = decode_8k();
    CompareGroupModel model(CompareGroupModel::Groups::by_kind);
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.set_comparison(parsed(raw));
    std::map<std::string, std::pair<double, double>> sums;  // kind -> predicted, measured
    std::map<std::string, int> counts;
    for (const Json& o : raw["ops"]) {
      sums[o["kind"]].first += o["predicted_us"].get<double>();
      sums[o["kind"]].second += o["measured_us"].get<double>();
      ++counts[o["kind"]];
    }
    QCOMPARE(model.rowCount(), static_cast<int>(sums.size()));
    const int predicted = model.column_of(CompareGroupModel::Column::predicted_us);
    const int measured = model.column_of(CompareGroupModel::Column::measured_us);
    const int error = model.column_of(CompareGroupModel::Column::error_us);
    for (int r = 0; r < model.rowCount(); ++r) {
      const std::string kind = text(model, r, 0).toStdString();
      QVERIFY2(sums.count(kind), kind.c_str());
      QCOMPARE(text(model, r, 1).toInt(), counts[kind]);
      QVERIFY(std::fabs(number_in(text(model, r, predicted)) - sums[kind].first) < 0.0051);
      QVERIFY(std::fabs(number_in(text(model, r, measured)) - sums[kind].second) < 0.0051);
      QVERIFY(std::fabs(number_in(text(model, r, error)) - (sums[kind].first - sums[kind].second)) < 0.0051);
    }
  }

  void per_step_sums_are_the_ops_measurements_of_that_step() {
    const Json raw = decode_8k();
    CompareGroupModel model(CompareGroupModel::Groups::by_step);
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    const auto d = parsed(raw);
    model.set_comparison(d);
    const std::size_t steps = raw["ops"][0]["measured_us_by_step"].size();
    QCOMPARE(model.rowCount(), static_cast<int>(steps));
    std::vector<double> measured(steps, 0.0);
    double predicted = 0;
    for (const Json& o : raw["ops"]) {
      predicted += o["predicted_us"].get<double>();
      for (std::size_t s = 0; s < steps; ++s) measured[s] += o["measured_us_by_step"][s].get<double>();
    }
    const int measured_column = model.column_of(CompareGroupModel::Column::measured_us);
    for (int s = 0; s < model.rowCount(); ++s) {
      QCOMPARE(text(model, s, 0), QString::number(s));
      QVERIFY(std::fabs(number_in(text(model, s, measured_column)) - measured[static_cast<std::size_t>(s)]) < 0.0051);
    }
    // The summary's step line: the predicted sum and the median of the steps' measured sums.
    std::sort(measured.begin(), measured.end());
    const double median = steps % 2 ? measured[steps / 2] : (measured[steps / 2 - 1] + measured[steps / 2]) / 2;
    const QStringList lines = k3::gui::summary_lines(*d);
    const QString step_line = lines.filter("step, summed").value(0);
    QVERIFY2(step_line.contains(QString::fromStdString(fmt::format("predicted {:.2f} µs", predicted))),
             qPrintable(step_line));
    QVERIFY2(step_line.contains(
                 QString::fromStdString(fmt::format("measured {:.2f} µs (median of {} steps", median, steps))),
             qPrintable(step_line));
    QVERIFY(lines
                .filter(QString::fromStdString(
                    fmt::format("coverage {:.1f} %", raw["summary"]["coverage_percent"].get<double>())))
                .size() == 1);
  }

  void leftovers_list_what_the_join_left() {
    const Json raw = decode_8k();
    CompareLeftoverModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.set_comparison(parsed(raw));
    const std::size_t expected = raw["unattributed_kernels"].size() + raw["not_predicted"].size() +
                                 raw["not_measured"].size() + raw["fused"].size();
    QCOMPARE(model.rowCount(), static_cast<int>(expected));
    std::set<QString> rows;
    for (int r = 0; r < model.rowCount(); ++r) {
      rows.insert(text(model, r, CompareLeftoverModel::what_column) + " | " +
                  text(model, r, CompareLeftoverModel::name_column) + " | " +
                  text(model, r, CompareLeftoverModel::total_us_column));
    }
    for (const Json& m : raw["not_predicted"]) {
      const QString row = QString("measured, not predicted | %1 | %2")
                              .arg(QString::fromStdString(m["name"].get<std::string>()))
                              .arg(QString::fromStdString(fmt::format("{:.2f}", m["measured_us"].get<double>())));
      QVERIFY2(rows.count(row), qPrintable(row));
    }
    QVERIFY(rows.count("fused into its host | L001.norm.attn_in -> L001.attnres.pre_attn | "));
    // A fusion selects its host, which carries the fused op's prediction.
    for (int r = 0; r < model.rowCount(); ++r) {
      if (model.row(r).what == CompareLeftoverModel::What::fused) {
        QCOMPARE(model.row(r).op, std::string("L001.attnres.pre_attn"));
        break;
      }
    }
  }

  void counters_stand_beside_the_predicted_bytes_and_flops() {
    const Json raw = with_counters();
    const auto d = parsed(raw);
    QVERIFY(d->has_counters);
    CompareOpModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.set_comparison(d);
    const int predicted_mb = model.column_of(CompareOpModel::Column::predicted_mb);
    const int dram_mb = model.column_of(CompareOpModel::Column::measured_dram_mb);
    const int tensor = model.column_of(CompareOpModel::Column::measured_tensor_gflop);
    QCOMPARE(dram_mb, predicted_mb + 1);
    QVERIFY(tensor > dram_mb);
    std::map<std::string, const Json*> counters;
    for (const Json& o : raw["counters"]["ops"]) counters[o["name"]] = &o;
    int joined = 0;
    for (int r = 0; r < model.rowCount(); ++r) {
      const auto it = counters.find(text(model, r, 0).toStdString());
      if (it == counters.end()) {
        QCOMPARE(text(model, r, dram_mb), QString("—"));
        continue;
      }
      ++joined;
      const Json& c = *it->second;
      QCOMPARE(text(model, r, dram_mb),
               QString::fromStdString(fmt::format("{:.2f}", c["measured_bytes"].get<double>() / 1e6)));
      const QString expected_tensor =
          c["measured_tensor_flops"].is_null()
              ? QString("—")
              : QString::fromStdString(fmt::format("{:.3f}", c["measured_tensor_flops"].get<double>() / 1e9));
      QCOMPARE(text(model, r, tensor), expected_tensor);
    }
    QVERIFY(joined > 40);
    CompareGroupModel kinds(CompareGroupModel::Groups::by_kind);
    kinds.set_comparison(d);
    const int kind_dram = kinds.column_of(CompareGroupModel::Column::measured_dram_mb);
    QVERIFY(kind_dram > 0);
    for (const Json& g : raw["counters"]["by_kind"]) {
      for (int r = 0; r < kinds.rowCount(); ++r) {
        if (text(kinds, r, 0).toStdString() != g["kind"]) continue;
        QCOMPARE(text(kinds, r, kind_dram),
                 QString::fromStdString(fmt::format("{:.2f}", g["measured_bytes"].get<double>() / 1e6)));
      }
    }
    QCOMPARE(k3::gui::summary_lines(*d).filter("counters (").size(), 1);
  }

  void a_file_that_is_not_a_comparison_names_the_key() {
    Json raw = decode_8k();
    raw["ops"][0].erase("measured_us");
    try {
      k3::gui::compare_from_json(raw, "broken.json");
      QFAIL("expected an InputError");
    } catch (const k3::InputError& e) {
      QVERIFY2(std::string(e.what()).find("broken.json: key 'ops[].measured_us' is missing") != std::string::npos,
               e.what());
    }
    raw = decode_8k();
    raw.erase("summary");
    QVERIFY_THROWS_EXCEPTION(k3::InputError, k3::gui::compare_from_json(raw, "broken.json"));
  }

  void the_view_says_how_to_get_a_comparison() {
    k3::gui::Document document(data());
    k3::gui::CompareView view(&document);
    view.resize(1200, 800);
    QVERIFY(!view.showing_comparison());
    QVERIFY(view.message_text().contains("k3perf compare"));
    QVERIFY(view.message_text().contains("trace"));
    QVERIFY(drawn_share(view.grab().toImage()) > 0.002);
  }

  void the_view_shows_the_comparison_and_follows_the_selection() {
    k3::gui::Document document(data());
    k3::gui::CompareView view(&document);
    view.resize(1400, 900);
    document.open(kRun + "/compare_decode_b1_ctx8192.json");
    QVERIFY(view.showing_comparison());
    QVERIFY(view.summary_text().contains("compare_decode_b1_ctx8192.json"));
    const QImage image = view.grab().toImage();
    QVERIFY(drawn_share(image) > 0.05);
    QTableView* ops = view.op_table();
    QCOMPARE(ops->model()->rowCount(), static_cast<int>(decode_8k()["ops"].size()));
    QCOMPARE(text(*ops->model(), 0, 0), QString("head.lm_head"));
    // A click on a row selects its op everywhere.
    ops->selectRow(2);
    QCOMPARE(QString::fromStdString(document.selected_op()), text(*ops->model(), 2, 0));
    // The Document's selection is highlighted here: the selected row, in bold.
    document.select_op("L003.moe.router");
    const QModelIndex current = ops->selectionModel()->currentIndex();
    QCOMPARE(text(*ops->model(), current.row(), 0), QString("L003.moe.router"));
    QVERIFY(ops->selectionModel()->isRowSelected(current.row()));
    QVERIFY(ops->model()->index(current.row(), 0).data(Qt::FontRole).value<QFont>().bold());
    QVERIFY(!ops->model()->index(0, 0).data(Qt::FontRole).value<QFont>().bold());
    document.select_op("");
    QVERIFY(!ops->selectionModel()->hasSelection());
    // Filter and ranking controls.
    view.filter()->setText("moe.experts");
    QCOMPARE(ops->model()->rowCount(), 3);
    view.filter()->clear();
    view.rank()->setCurrentIndex(1);
    QCOMPARE(text(*ops->model(), 0, 0).toStdString(), std::string("L004.mla.latent_norm"));
    QVERIFY(view.kind_table()->model()->rowCount() > 5);
  }
};

QTEST_MAIN(CompareTest)
#include "compare_test.moc"
