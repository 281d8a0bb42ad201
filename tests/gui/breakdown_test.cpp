// The Breakdown view's data against the prediction it shows: bars and groups add up to the sums over
// PredictionData's ops, shares to 100 %, the tree passes QAbstractItemModelTester, copying gives the
// row as text, and the view draws the bars and highlights the op selected elsewhere.
#include "gui/model/breakdown_bars.h"
#include "gui/model/breakdown_tree_model.h"
#include "gui/views/breakdown_view.h"

#include "cli/default_scenario.h"
#include "gui/model/document.h"

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QClipboard>
#include <QImage>
#include <QLineEdit>
#include <QTest>
#include <QTreeView>

#include <cmath>
#include <map>

using k3::gui::BreakdownTreeModel;
using k3::gui::Document;
using k3::gui::PredictionData;

namespace {
const std::string kSource = K3PERF_SOURCE_DIR;
k3::DataPaths data() { return k3::DataPaths::under(kSource + "/scenarios"); }

PredictionData default_prediction() {
  Document d(data());
  d.set_scenario(k3::cli::kDefaultScenarioYaml, "<default>");
  return *d.prediction();
}

bool close(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }
}  // namespace

class BreakdownTest : public QObject {
  Q_OBJECT

 private slots:
  void each_bar_adds_up_to_the_step() {
    const PredictionData p = default_prediction();
    const auto bars = k3::gui::step_time_bars(p);
    QCOMPARE(bars.size(), std::size_t{4});
    // Op kind and bound, summed here straight from the ops.
    std::map<std::string, double> by_kind, by_bound;
    for (const auto& o : p.ops) {
      by_kind[o.kind] += o.exposed_us;
      by_bound[o.bound] += o.exposed_us;
    }
    for (const auto& bar : bars) {
      QVERIFY2(close(bar.total, p.step_us), bar.title.c_str());
      double shares = 0;
      for (std::size_t i = 0; i < bar.segments.size(); ++i) {
        shares += bar.segments[i].share_percent;
        if (i > 0) QVERIFY(bar.segments[i - 1].value >= bar.segments[i].value);
      }
      QVERIFY(close(shares, 100.0));
    }
    for (const auto& s : bars[2].segments) QVERIFY2(close(s.value, by_kind.at(s.name)), s.name.c_str());
    for (const auto& s : bars[3].segments) QVERIFY2(close(s.value, by_bound.at(s.name)), s.name.c_str());
    QCOMPARE(bars[3].segments.size(), by_bound.size());

    // Every op lies in one segment of each bar.
    for (int i = 0; i < static_cast<int>(p.ops.size()); i += 97) {
      const auto segments = k3::gui::segments_of_op(p, i);
      for (std::size_t b = 0; b < bars.size(); ++b) {
        const auto& seg = bars[b].segments;
        QVERIFY2(std::any_of(seg.begin(), seg.end(), [&](const auto& s) { return s.name == segments[b]; }),
                 (p.ops[static_cast<std::size_t>(i)].name + " in " + bars[b].title).c_str());
      }
    }

    const auto memory = k3::gui::memory_bar(p);
    QVERIFY(close(memory.bar.total,
                  p.weights_bytes + p.kv_bytes + p.kda_state_bytes + p.activation_bytes + p.reserved_bytes));
    QVERIFY(close(memory.bar.total, p.total_bytes));
    QCOMPARE(memory.bar.segments.front().name, std::string("weights"));
    QCOMPARE(memory.fits, p.total_bytes <= p.usable_bytes);
  }

  void groups_are_the_sums_over_their_ops() {
    const PredictionData p = default_prediction();
    BreakdownTreeModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.set_prediction(p);
    std::map<std::string, std::pair<int, double>> direct;  // base name -> count, exposed µs
    for (const auto& o : p.ops) {
      auto& [n, us] = direct[o.base_name()];
      ++n;
      us += o.exposed_us;
    }
    QCOMPARE(static_cast<std::size_t>(model.rowCount()), direct.size());
    double shares = 0;
    int ops = 0;
    for (int row = 0; row < model.rowCount(); ++row) {
      const QModelIndex g = model.index(row, BreakdownTreeModel::op);
      const auto& group = model.groups()[static_cast<std::size_t>(row)];
      const auto& [n, us] = direct.at(group.name);
      QCOMPARE(model.index(row, BreakdownTreeModel::count).data(Qt::UserRole).toInt(), n);
      QVERIFY(close(model.index(row, BreakdownTreeModel::total_us).data(Qt::UserRole).toDouble(), us));
      QCOMPARE(model.rowCount(g), n > 1 ? n : 0);
      double children = 0;
      for (int c = 0; c < model.rowCount(g); ++c) {
        children += model.index(c, BreakdownTreeModel::total_us, g).data(Qt::UserRole).toDouble();
      }
      if (n > 1) QVERIFY(close(children, us));
      shares += model.index(row, BreakdownTreeModel::share_percent).data(Qt::UserRole).toDouble();
      ops += n;
    }
    QVERIFY(close(shares, 100.0));
    QCOMPARE(static_cast<std::size_t>(ops), p.ops.size());
  }

  void a_known_row_copies_as_text() {
    const PredictionData p = default_prediction();
    BreakdownTreeModel model;
    model.set_prediction(p);
    // mla.attn_decode, summed here.
    int n = 0;
    double us = 0, flops = 0, bytes = 0;
    std::string bound, first;
    for (const auto& o : p.ops) {
      if (o.base_name() != "mla.attn_decode") continue;
      if (first.empty()) first = o.name;
      ++n;
      us += o.exposed_us;
      flops += o.flops;
      bytes += o.bytes;
      bound = bound.empty() || bound == o.bound ? o.bound : "mixed";
    }
    QVERIFY(n > 1);
    QModelIndex row;
    for (int r = 0; r < model.rowCount(); ++r) {
      if (model.index(r, 0).data().toString() == "mla.attn_decode") row = model.index(r, 0);
    }
    QVERIFY(row.isValid());
    QCOMPARE(model.op_name(row), first);  // a group row stands for its first layer's op
    const QString expected = QString(
                                 "Op\tCount\tTotal (µs)\tShare (%)\tPer instance (µs)\tBound\tIntensity (FLOP/B)\n"
                                 "mla.attn_decode\t%1\t%2\t%3\t%4\t%5\t%6\n")
                                 .arg(n)
                                 .arg(us, 0, 'f', 1)
                                 .arg(us / p.step_us * 100, 0, 'f', 2)
                                 .arg(us / n, 0, 'f', 2)
                                 .arg(QString::fromStdString(bound))
                                 .arg(flops / bytes, 0, 'f', 1);
    QCOMPARE(k3::gui::rows_as_tsv(model, {row, row.siblingAtColumn(3)}), expected);
    // A layer's row under it is its op.
    QCOMPARE(model.index_of_op(first).parent(), row);
    QCOMPARE(model.op_name(model.index_of_op(first)), first);
  }

  void the_view_draws_filters_copies_and_follows_the_selection() {
    Document d(data());
    d.set_scenario(k3::cli::kDefaultScenarioYaml, "<default>");
    k3::gui::BreakdownView view(&d);
    view.resize(1200, 900);
    view.show();
    QApplication::processEvents();
    const QImage image = view.grab().toImage();
    QVERIFY(!image.isNull());
    QVERIFY(view.bar_labels().contains("moe"));  // the module bar names its largest module
    int distinct = 0;
    QColor last;
    for (int x = 0; x < image.width(); x += 8) {
      const QColor c = image.pixelColor(x, view.first_bar_center_y());
      if (c != last) ++distinct;
      last = c;
    }
    QVERIFY2(distinct >= 3, "the first bar has coloured segments");

    // Selecting elsewhere selects the row here; selecting here selects everywhere.
    const std::string op = d.prediction()->ops[10].name;
    d.select_op(op);
    QCOMPARE(view.selected_row_op(), op);
    view.filter_box()->setText("attn_decode");
    QVERIFY(view.tree()->model()->rowCount() == 1);
    view.tree()->setCurrentIndex(view.tree()->model()->index(0, 0));
    QVERIFY(d.selected_op().find("mla.attn_decode") != std::string::npos);

    QTest::keySequence(view.tree(), QKeySequence::Copy);
    const QString copied = QApplication::clipboard()->text();
    QVERIFY2(copied.startsWith("Op\tCount\tTotal (µs)"), qPrintable(copied));
    QVERIFY2(copied.contains("\nmla.attn_decode\t"), qPrintable(copied));
  }
};

QTEST_MAIN(BreakdownTest)
#include "breakdown_test.moc"
