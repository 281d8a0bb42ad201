// The rows of a live prediction are what the prediction JSON says: prediction_data(p) against
// prediction_from_json(to_json(p)), and prediction_file(p) against parse_prediction of the same JSON, field by
// field, for decode, prefill and a multi-GPU layout.
#include "gui/model/prediction_data.h"
#include "cli/default_scenario.h"
#include "core/data_paths.h"
#include "core/scenario.h"
#include "sim/predict.h"

#include <QTest>

using k3::gui::PredictedOpRow;
using k3::gui::PredictionData;

namespace {

const std::string kSource = K3PERF_SOURCE_DIR;

void compare_groups(const std::vector<k3::gui::GroupRow>& a, const std::vector<k3::gui::GroupRow>& b) {
  QCOMPARE(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    QCOMPARE(a[i].group, b[i].group);
    QCOMPARE(a[i].count, b[i].count);
    QCOMPARE(a[i].time_us, b[i].time_us);
    QCOMPARE(a[i].flops, b[i].flops);
    QCOMPARE(a[i].bytes, b[i].bytes);
  }
}

void compare_rows(const PredictionData& live, const PredictionData& json) {
  QCOMPARE(live.title(), json.title());
  QCOMPARE(live.name, json.name);
  QCOMPARE(live.hardware, json.hardware);
  QCOMPARE(live.gpus, json.gpus);
  QCOMPARE(live.kv_cache, json.kv_cache);
  QCOMPARE(live.overrides, json.overrides);
  QCOMPARE(live.step_us, json.step_us);
  QCOMPARE(live.tokens_per_s, json.tokens_per_s);
  QCOMPARE(live.total_bytes, json.total_bytes);
  QCOMPARE(live.usable_bytes, json.usable_bytes);
  QCOMPARE(live.fits, json.fits);
  QCOMPARE(live.max_batch_at_context, json.max_batch_at_context);
  compare_groups(live.by_layer_kind, json.by_layer_kind);
  compare_groups(live.by_module, json.by_module);
  compare_groups(live.by_bound, json.by_bound);
  QCOMPARE(live.engine_only_ops, json.engine_only_ops);
  QCOMPARE(live.ops.size(), json.ops.size());
  for (std::size_t i = 0; i < live.ops.size(); ++i) {
    const PredictedOpRow& a = live.ops[i];
    const PredictedOpRow& b = json.ops[i];
    QCOMPARE(a.name, b.name);
    QCOMPARE(a.kind, b.kind);
    QCOMPARE(a.module, b.module);
    QCOMPARE(a.bound, b.bound);
    QCOMPARE(a.compute, b.compute);
    QCOMPARE(a.layer, b.layer);
    QCOMPARE(a.flops, b.flops);
    QCOMPARE(a.bytes, b.bytes);
    QCOMPARE(a.kernels, b.kernels);
    QCOMPARE(a.time_us, b.time_us);
    QCOMPARE(a.exposed_us, b.exposed_us);
    QCOMPARE(a.collective_bytes, b.collective_bytes);
    QCOMPARE(a.group_size, b.group_size);
    QCOMPARE(a.runs_inside, b.runs_inside);
  }
}

// What compare reads: the live ops against profiler::parse_prediction of the JSON.
void compare_files(const k3::profiler::PredictionFile& live, const k3::profiler::PredictionFile& json) {
  QCOMPARE(live.hardware, json.hardware);
  QCOMPARE(live.cuda_graphs, json.cuda_graphs);
  QCOMPARE(live.records_engine, json.records_engine);
  QCOMPARE(live.engine_only, json.engine_only);
  QCOMPARE(live.ops.size(), json.ops.size());
  for (std::size_t i = 0; i < live.ops.size(); ++i) {
    QCOMPARE(live.ops[i].name, json.ops[i].name);
    QVERIFY(live.ops[i].kind == json.ops[i].kind);
    QVERIFY(live.ops[i].compute == json.ops[i].compute);
    QCOMPARE(live.ops[i].flops, json.ops[i].flops);
    QCOMPARE(live.ops[i].bytes, json.ops[i].bytes);
    QCOMPARE(live.ops[i].kernels, json.ops[i].kernels);
    QCOMPARE(live.ops[i].bound, json.ops[i].bound);
    QCOMPARE(live.ops[i].time_us, json.ops[i].time_us);
    QCOMPARE(live.ops[i].runs_inside, json.ops[i].runs_inside);
  }
}

}  // namespace

class PredictionDataTest : public QObject {
  Q_OBJECT

 private slots:
  void live_rows_equal_the_json_rows_data() {
    QTest::addColumn<QString>("path");
    QTest::addColumn<QStringList>("sets");
    QTest::newRow("default decode") << QString() << QStringList();
    QTest::newRow("default prefill") << QString() << QStringList{"phase=prefill", "workload.new_tokens=32768"};
    QTest::newRow("h200x16") << QString::fromStdString(kSource + "/scenarios/k3-h200x16-decode-128k.yaml")
                             << QStringList{"workload.batch=64"};
  }
  void live_rows_equal_the_json_rows() {
    QFETCH(QString, path);
    QFETCH(QStringList, sets);
    const k3::DataPaths data = k3::DataPaths::under(kSource + "/scenarios");
    std::vector<std::string> edits;
    for (const QString& e : sets) edits.push_back(e.toStdString());
    const k3::Scenario s = path.isEmpty() ? k3::parse_scenario(k3::cli::kDefaultScenarioYaml, "<default>", data, edits)
                                          : k3::load_scenario(path.toStdString(), data, edits);
    const k3::Prediction p = k3::predict(s);
    compare_rows(k3::gui::prediction_data(p, "x"), k3::gui::prediction_from_json(k3::to_json(p), "x"));
    compare_files(k3::gui::prediction_file(p, "x"), k3::profiler::parse_prediction(k3::to_json(p).dump(), "x"));
  }
};

QTEST_GUILESS_MAIN(PredictionDataTest)
#include "prediction_data_test.moc"
