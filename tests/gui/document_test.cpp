// The Document against the libraries it fronts: its prediction is `predict`'s, its edits are `--set`'s,
// its comparison is `compare`'s, and it tells the files apart.
#include "gui/model/document.h"
#include "cli/default_scenario.h"
#include "core/data_paths.h"
#include "core/error.h"
#include "core/scenario.h"
#include "sim/predict.h"

#include <QSignalSpy>
#include <QTest>

using k3::gui::Document;
using k3::gui::FileKind;

namespace {
const std::string kSource = K3PERF_SOURCE_DIR;
const std::string kRun = kSource + "/bench/results/2026-12-01-h200-engine-traces-9";
k3::DataPaths data() { return k3::DataPaths::under(kSource + "/scenarios"); }
}  // namespace

class DocumentTest : public QObject {
  Q_OBJECT

 private slots:
  void opens_on_the_default_scenario_as_predict_does() {
    Document d(data());
    QSignalSpy spy(&d, &Document::prediction_changed);
    d.set_scenario(k3::cli::kDefaultScenarioYaml, "<default>");
    QCOMPARE(spy.count(), 1);
    QVERIFY(d.prediction().has_value());
    const k3::Prediction direct = k3::predict(k3::parse_scenario(k3::cli::kDefaultScenarioYaml, "<default>", data()));
    QCOMPARE(d.prediction()->step_us, direct.step.step_us);
    QCOMPARE(d.prediction()->ops.size(), direct.graph.ops.size());
    QCOMPARE(d.prediction()->model, std::string("kimi-k3"));
    QVERIFY(d.hardware() != nullptr);
  }

  void an_edit_repredicts_like_set() {
    Document d(data());
    d.set_scenario(k3::cli::kDefaultScenarioYaml, "<default>");
    d.set_edit("workload.batch", "64");
    const k3::Prediction direct =
        k3::predict(k3::parse_scenario(k3::cli::kDefaultScenarioYaml, "<default>", data(), {"workload.batch=64"}));
    QCOMPARE(d.prediction()->batch, 64LL);
    QCOMPARE(d.prediction()->step_us, direct.step.step_us);
    QCOMPARE(d.value_of("workload.batch"), std::string("64"));
    d.set_edit("workload.batch", "");
    QCOMPARE(d.prediction()->batch, 8LL);
  }

  void an_invalid_edit_keeps_the_last_prediction_and_says_why() {
    Document d(data());
    d.set_scenario(k3::cli::kDefaultScenarioYaml, "<default>");
    const double before = d.prediction()->step_us;
    d.set_edit("parallelism.tp", "7");
    QVERIFY(!d.error().empty());
    QCOMPARE(d.error_key(), std::string("parallelism.tp"));
    QCOMPARE(d.prediction()->step_us, before);
    d.set_edit("parallelism.tp", "");
    QVERIFY(d.error().empty());
  }

  void a_pinned_baseline_stays_while_the_scenario_changes() {
    Document d(data());
    d.set_scenario(k3::cli::kDefaultScenarioYaml, "<default>");
    d.pin_baseline();
    d.set_edit("workload.batch", "1");
    QVERIFY(d.baseline().has_value());
    QCOMPARE(d.baseline()->batch, 8LL);
    QCOMPARE(d.prediction()->batch, 1LL);
    d.clear_baseline();
    QVERIFY(!d.baseline().has_value());
  }

  void tells_the_files_apart() {
    QCOMPARE(k3::gui::detect_file_kind(kRun + "/trace_decode_b1_ctx8192.json.gz"), FileKind::trace);
    QCOMPARE(k3::gui::detect_file_kind(kRun + "/pred_decode_b1_ctx8192.json"), FileKind::prediction);
    QCOMPARE(k3::gui::detect_file_kind(kRun + "/compare_decode_b1_ctx8192.json"), FileKind::comparison);
    QCOMPARE(k3::gui::detect_file_kind(kSource + "/scenarios/k3-h200x16-decode-128k.yaml"), FileKind::scenario);
    QCOMPARE(k3::gui::detect_file_kind(kRun), FileKind::folder);
    QCOMPARE(k3::gui::detect_file_kind(kRun + "/README.md"), FileKind::unknown);
  }

  void a_trace_and_its_prediction_compare_as_compare_does() {
    Document d(data());
    d.open(kRun + "/pred_decode_b1_ctx8192.json");
    QVERIFY(d.prediction().has_value());
    QVERIFY(!d.has_scenario());
    QVERIFY(d.hardware() != nullptr);  // found by its display name
    d.open(kRun + "/trace_decode_b1_ctx8192.json.gz");
    QVERIFY(d.trace() != nullptr);
    QVERIFY(d.comparison().has_value());
    const auto& c = *d.comparison();
    QVERIFY(c.contains("ops"));
    QVERIFY(c["ops"].size() > 20);
  }

  void a_folder_opens_its_trace_with_the_prediction_of_the_same_run() {
    Document d(data());
    const std::vector<std::string> opened = d.open(kRun);
    QCOMPARE(opened.size(), std::size_t{2});
    QVERIFY(opened[0].find("pred_decode_b1_ctx1048512.json") != std::string::npos);
    QVERIFY(opened[1].find("trace_decode_b1_ctx1048512.json.gz") != std::string::npos);
    QVERIFY(d.comparison().has_value());
  }

  void a_file_it_cannot_read_names_itself() {
    Document d(data());
    try {
      d.open(kRun + "/README.md");
      QFAIL("expected an InputError");
    } catch (const k3::InputError& e) {
      QVERIFY(std::string(e.what()).find("README.md") != std::string::npos);
    }
  }
};

QTEST_GUILESS_MAIN(DocumentTest)
#include "document_test.moc"
