// The baseline deltas against sums taken directly over the two predictions' ops.
#include "gui/model/baseline_delta.h"

#include "cli/default_scenario.h"
#include "gui/model/document.h"

#include <QAbstractItemModelTester>
#include <QTest>

#include <cmath>

using k3::gui::BaselineDeltaModel;
using k3::gui::Document;
using k3::gui::PredictionData;

namespace {
const std::string kSource = K3PERF_SOURCE_DIR;
k3::DataPaths data() { return k3::DataPaths::under(kSource + "/scenarios"); }

double exposed_of_kind(const PredictionData& p, const std::string& kind) {
  double total = 0;
  for (const k3::gui::PredictedOpRow& op : p.ops) total += op.kind == kind ? op.exposed_us : 0;
  return total;
}
}  // namespace

class BaselineTest : public QObject {
  Q_OBJECT

 private slots:
  void per_kind_deltas_are_the_sums_over_each_predictions_ops() {
    Document d(data());
    d.set_scenario(k3::cli::kDefaultScenarioYaml, "<default>");
    d.pin_baseline();
    d.set_edit("overrides.attention", "all_mla");  // the KDA kinds leave, MLA grows
    QVERIFY2(d.error().empty(), d.error().c_str());
    const PredictionData& base = *d.baseline();
    const PredictionData& now = *d.prediction();

    BaselineDeltaModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.set_predictions(base, now);
    QVERIFY(model.rowCount() > 5);
    double baseline_sum = 0, current_sum = 0;
    bool kda_gone = false;
    for (const k3::gui::KindDelta& r : model.rows()) {
      QCOMPARE(r.baseline_us, exposed_of_kind(base, r.kind));
      QCOMPARE(r.current_us, exposed_of_kind(now, r.kind));
      baseline_sum += r.baseline_us;
      current_sum += r.current_us;
      if (r.kind.find("kda") != std::string::npos) {
        QCOMPARE(r.current_us, 0.0);
        QVERIFY(std::abs(r.delta_percent() + 100.0) < 1e-9);
        kda_gone = true;
      }
    }
    QVERIFY(kda_gone);
    // Every op falls in one kind: the rows add up to the steps.
    QVERIFY(std::abs(baseline_sum - base.step_us) < 1e-6 * base.step_us);
    QVERIFY(std::abs(current_sum - now.step_us) < 1e-6 * now.step_us);

    // The row of MLA attention as it reads.
    for (int row = 0; row < model.rowCount(); ++row) {
      if (model.index(row, BaselineDeltaModel::kind).data().toString() != "mla_attention") continue;
      const double before = exposed_of_kind(base, "mla_attention"), after = exposed_of_kind(now, "mla_attention");
      QVERIFY(after > before);
      QCOMPARE(model.index(row, BaselineDeltaModel::delta_us).data().toString(),
               QString("+%1").arg(after - before, 0, 'f', 1));
      QCOMPARE(model.index(row, BaselineDeltaModel::delta_percent).data().toString(),
               QString("+%1 %").arg((after - before) / before * 100, 0, 'f', 1));
      QCOMPARE(model.index(row, BaselineDeltaModel::delta_us).data(Qt::UserRole).toDouble(), after - before);
    }
  }

  void the_summary_is_step_throughput_and_memory() {
    Document d(data());
    d.set_scenario(k3::cli::kDefaultScenarioYaml, "<default>");
    d.pin_baseline();
    d.set_edit("workload.batch", "32");
    const auto s = k3::gui::summary_deltas(*d.baseline(), *d.prediction());
    QCOMPARE(s.size(), std::size_t{3});
    QCOMPARE(s[0].baseline, d.baseline()->step_us / 1e3);
    QCOMPARE(s[0].current, d.prediction()->step_us / 1e3);
    QCOMPARE(s[1].current, d.prediction()->tokens_per_s);
    QCOMPARE(s[2].current, d.prediction()->total_bytes / double(1ull << 30));
    QVERIFY(s[2].delta_percent() > 0);  // four times the sequences: more KV
    QCOMPARE(k3::gui::percent_text(-4.04), std::string("\u22124.0 %"));
    QCOMPARE(k3::gui::percent_text(std::nan("")), std::string("new"));
  }
};

QTEST_GUILESS_MAIN(BaselineTest)
#include "baseline_test.moc"
