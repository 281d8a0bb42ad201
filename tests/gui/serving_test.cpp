// The Serving tab against the libraries it fronts: the claims table says what `verify`'s report says,
// the cache curve has the properties of a hit rate, each break-even marker sits on a sign change of the
// advantage, the plan's front is not dominated, edits re-run only what they change, and the view shows
// all four once its workers are done.
#include "cli/default_scenario.h"
#include "core/data_paths.h"
#include "gui/model/document.h"
#include "gui/model/serving_data.h"
#include "gui/views/serving_view.h"
#include "plot/views/sim_charts.h"
#include "sim/claims/claim_report.h"
#include "sim/workload/mooncake_reader.h"
#include "sim/workload/trace_stats.h"

#include <QAbstractItemModelTester>
#include <QLocale>
#include <QSignalSpy>
#include <QTableView>
#include <QTest>

#include <cmath>
#include <map>
#include <memory>

using k3::gui::ServingData;
using k3::gui::ServingFiles;
using k3::gui::ServingPart;

namespace {
const std::string kSource = K3PERF_SOURCE_DIR;
k3::DataPaths data() { return k3::DataPaths::under(kSource + "/scenarios"); }
constexpr int kWorkerTimeoutMs = 300000;  // plan and verify on a slow, shared machine

bool wait_idle(ServingData& d) {
  QSignalSpy idle(&d, &ServingData::idle);
  return !d.busy() || idle.wait(kWorkerTimeoutMs);
}

QStringList lines_of(const std::string& text) { return QString::fromStdString(text).split('\n'); }
}  // namespace

class ServingTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    serving_ = std::make_unique<ServingData>(data(), ServingFiles::defaults(data()));
    for (ServingPart part : k3::gui::kServingParts) serving_->compute(part);
    QVERIFY(serving_->busy());
    QVERIFY(wait_idle(*serving_));
    for (ServingPart part : k3::gui::kServingParts) QCOMPARE(serving_->error(part), std::string());
  }

  void default_files_are_the_repositorys() {
    const ServingFiles f = ServingFiles::defaults(data());
    QCOMPARE(QString::fromStdString(f.trace),
             QString::fromStdString(kSource + "/data/traces/conversation_trace.jsonl"));
    QCOMPARE(QString::fromStdString(f.plan),
             QString::fromStdString(kSource + "/scenarios/serving/k3-h200x16-chat.yaml"));
  }

  void claims_table_says_what_verify_says() {
    k3::gui::ClaimsTableModel* model = serving_->claims();
    QAbstractItemModelTester tester(model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    const auto& results = model->results();
    QCOMPARE(model->rowCount(), int(k3::load_claims(data().claims_dir).size()));
    // The verdict column tallied as verify's last line.
    std::map<QString, int> tally;
    for (int row = 0; row < model->rowCount(); ++row) ++tally[model->index(row, 1).data().toString()];
    const QStringList report = lines_of(k3::format_claim_results(results));
    const QString summary = report[report.size() - 2];
    QCOMPARE(summary, QString("%1 claims: %2 reproduced, %3 explained, %4 contradicted, %5 not modelled yet")
                          .arg(model->rowCount())
                          .arg(tally["reproduced"])
                          .arg(tally["explained"])
                          .arg(tally["contradicted"])
                          .arg(tally["not_modelled"]));
    // Every "key: predicted vs reported" line is a line of verify's report with the same three texts.
    for (int row = 0; row < model->rowCount(); ++row) {
      const QStringList cell = model->index(row, 2).data().toString().split('\n');
      QCOMPARE(cell.size(), int(results[std::size_t(row)].values.size()));
      for (const QString& line : cell) {
        const QString key = line.section(": ", 0, 0);
        const QString predicted = line.section(": ", 1).section(" vs ", 0, 0);
        const QString reported = line.section(" vs ", 1).section("; measured", 0, 0).section("  (outside)", 0, 0);
        bool found = false;
        for (const QString& r : report) {
          found = found || (r.trimmed().startsWith(key + " ") && r.contains("reported " + reported) &&
                            r.contains("predicted " + predicted));
        }
        QVERIFY2(found, qPrintable(line));
        // A measured figure (claim files' `measured`) reads as verify prints it.
        if (line.contains("; measured ")) {
          const QString measured = "measured " + line.section("; measured ", 1);
          QVERIFY2(report.filter(measured).size() == 1, qPrintable(line));
        }
      }
      for (const std::string& b : results[std::size_t(row)].evaluation.breakdown) {
        QVERIFY(model->breakdown(row).contains(QString::fromStdString(b)));
      }
    }
    QCOMPARE(model->index(0, 0).data().toString(), QString("P1"));
    QVERIFY(model->index(0, 2).data().toString().startsWith("total_params: 2.779e+12 vs 2.8e+12 ±1%"));
  }

  void cache_curve_is_a_hit_rate_curve() {
    const auto& c = serving_->cache_curve();
    QVERIFY(c.has_value());
    QCOMPARE(c->source, std::string("conversation_trace.jsonl"));
    QCOMPARE(c->model, std::string("kimi-k3"));
    QCOMPARE(int(c->points.size()), 6);
    const auto trace = k3::workload::read_mooncake_trace(ServingFiles::defaults(data()).trace);
    const double reuse = k3::workload::trace_stats(trace).prefix_reuse;
    for (std::size_t i = 0; i < c->points.size(); ++i) {
      const auto& p = c->points[i];
      QCOMPARE(p.capacity_tokens, std::pow(10.0, double(i + 4)));
      QVERIFY(p.token_hit_rate >= 0 && p.token_hit_rate <= p.kv_only_hit_rate + 1e-12);  // state can only lose hits
      QVERIFY(p.kv_only_hit_rate <= reuse + 1e-12);  // the trace's own prefix reuse bounds every cache
      if (i > 0) QVERIFY(p.kv_only_hit_rate >= c->points[i - 1].kv_only_hit_rate - 1e-12);  // more room, more hits
    }
    QVERIFY(c->points.back().token_hit_rate > 0.2);  // an unbounded cache keeps most of the reuse (37 %)
  }

  void breakeven_markers_sit_on_sign_changes() {
    const auto& r = serving_->breakeven();
    QVERIFY(r.has_value());
    int markers = 0;
    for (const k3::MetricCurve& curve : r->curves) {
      const k3::plot::Chart chart = k3::plot::breakeven_chart(*r, curve);
      QCOMPARE(chart.markers.size(), curve.crossings.size());
      for (const k3::plot::Marker& m : chart.markers) {
        const long long x = static_cast<long long>(m.x);
        const double before =
            k3::hybrid_advantage(curve.metric, k3::evaluate_breakeven_metric(r->spec, curve.metric, x - 1));
        const double at = k3::hybrid_advantage(curve.metric, k3::evaluate_breakeven_metric(r->spec, curve.metric, x));
        QVERIFY2((before > 0) != (at > 0), qPrintable(QString::fromStdString(m.label)));
        QVERIFY(QString::fromStdString(m.label).endsWith(" wins from " + QLocale(QLocale::English).toString(x) +
                                                         " tokens"));
        ++markers;
      }
    }
    QVERIFY(markers > 0);
  }

  void plan_front_is_not_dominated() {
    const auto& r = serving_->plan();
    QVERIFY(r.has_value());
    QVERIFY(!r->pareto.empty());
    for (std::size_t f : r->pareto) {
      const auto& a = r->candidates[f];
      for (std::size_t i : r->ranked) {
        const auto& b = r->candidates[i];
        const bool dominates =
            b.tokens_per_s_per_gpu >= a.tokens_per_s_per_gpu && b.tokens_per_s_per_user >= a.tokens_per_s_per_user &&
            (b.tokens_per_s_per_gpu > a.tokens_per_s_per_gpu || b.tokens_per_s_per_user > a.tokens_per_s_per_user);
        QVERIFY2(!dominates, qPrintable(QString::fromStdString(b.label() + " dominates " + a.label())));
      }
    }
    const auto labels = k3::plot::pareto_point_labels(*r);
    const k3::plot::Chart chart = k3::plot::pareto_chart(*r);
    QCOMPARE(labels[0].size(), chart.series[0].points.size());
    QCOMPARE(labels[1].size(), chart.series[1].points.size());
    QCOMPARE(labels[1][0], r->candidates[r->pareto[0]].label());
  }

  void edits_rerun_what_they_change() {
    ServingData d(data(), ServingFiles::defaults(data()));
    QSignalSpy changed(&d, &ServingData::changed);
    d.set_edits({"precision.kv_cache=fp8"});  // model or precision: the curve and the break-even
    QVERIFY(d.running(ServingPart::cache_curve));
    QVERIFY(d.running(ServingPart::breakeven));
    QVERIFY(!d.running(ServingPart::plan));
    QVERIFY(wait_idle(d));
    QCOMPARE(changed.count(), 2);
    // fp8 KV: the same tokens in fewer bytes than the bf16 curve.
    QVERIFY(d.cache_curve()->points[0].capacity_bytes < serving_->cache_curve()->points[0].capacity_bytes);
    d.set_edits({"precision.kv_cache=fp8", "parallelism.ep=8"});  // neither model nor precision: break-even only
    QVERIFY(!d.running(ServingPart::cache_curve));
    QVERIFY(d.running(ServingPart::breakeven));
    QVERIFY(wait_idle(d));
    d.set_edits({"parallelism.tp=7"});
    QVERIFY(wait_idle(d));
    QVERIFY(!d.error(ServingPart::breakeven).empty());  // why the edit does not solve, for the view to show
    QVERIFY(d.breakeven().has_value());                 // the last result that did stays
  }

  void view_shows_all_four_once_computed() {
    k3::gui::Document document(data());
    document.set_scenario(k3::cli::kDefaultScenarioYaml, "<default>");
    k3::gui::ServingView view(&document);
    QVERIFY(view.busy());  // computing in workers: the constructor did not wait
    QVERIFY(view.property("busy").toBool());
    view.resize(1400, 900);
    view.show();
    QTRY_VERIFY_WITH_TIMEOUT(!view.busy(), kWorkerTimeoutMs);
    const QImage image = view.grab().toImage();
    int non_white = 0;
    for (int y = 0; y < image.height(); y += 2) {
      for (int x = 0; x < image.width(); x += 2) non_white += image.pixel(x, y) != qRgb(255, 255, 255);
    }
    QVERIFY(non_white > image.width() * image.height() / 4 / 50);

    QVERIFY(view.cache_chart()->isVisible());
    QVERIFY(QString::fromStdString(view.cache_chart()->chart().title).contains("conversation_trace.jsonl"));
    QVERIFY(view.breakeven_chart()->isVisible());
    QVERIFY(!view.breakeven_chart()->chart().markers.empty());  // the metric shown first has a crossing
    const auto& plan = view.serving_data()->plan();
    QCOMPARE(view.plan_chart()->chart().series[0].points.size(), plan->ranked.size());
    QCOMPARE(view.claims_table()->model()->rowCount(), int(k3::load_claims(data().claims_dir).size()));

    // A plan point: its layout on hover, its figures on click.
    const std::string label = plan->candidates[plan->pareto[0]].label();
    QVERIFY(view.plan_chart()->point_text(1, 0).endsWith(QString::fromStdString(label)));
    const auto [x, y] = view.plan_chart()->chart().series[1].points[0];
    QTest::mouseClick(view.plan_chart(), Qt::LeftButton, {}, view.plan_chart()->frame().to_px(x, y).toPoint());
    QVERIFY(view.plan_choice().startsWith(QString::fromStdString(label)));

    // A what-if edit returns at once; the workers redo the curve and the break-even.
    document.set_edit("precision.kv_cache", "fp8");
    QVERIFY(view.busy());
    QTRY_VERIFY_WITH_TIMEOUT(!view.busy(), kWorkerTimeoutMs);
    QVERIFY(view.breakeven_chart()->isVisible());
  }

 private:
  std::unique_ptr<ServingData> serving_;
};

QTEST_MAIN(ServingTest)
#include "serving_test.moc"
