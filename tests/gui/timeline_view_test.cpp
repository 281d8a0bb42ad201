// The Timeline tab rendered offscreen: the "open a trace" message without one; with the recorded H200 trace its
// track labels, spans drawn in about one per pixel, the selection of an op from a click, the tree and the
// distribution following it, zoom keys, range statistics and search.
#include "gui/views/timeline_view.h"
#include "cli/default_scenario.h"
#include "core/data_paths.h"
#include "gui/model/document.h"
#include "gui/model/timeline_index.h"
#include "gui/model/timeline_tree_model.h"
#include "gui/views/timeline_canvas.h"
#include "gui/views/timeline_distribution.h"

#include <QLineEdit>
#include <QTest>

#include <set>

using k3::gui::TimelineCanvas;
using k3::gui::TimelineView;

namespace {
const std::string kSource = K3PERF_SOURCE_DIR;
const std::string kRun = kSource + "/bench/results/2026-12-01-h200-engine-traces-9";

// Distinct colours in the image: a blank widget has one or two.
int colours(const QImage& image) {
  std::set<QRgb> seen;
  for (int y = 0; y < image.height(); y += 3) {
    for (int x = 0; x < image.width(); x += 3) seen.insert(image.pixel(x, y));
  }
  return static_cast<int>(seen.size());
}
}  // namespace

class TimelineViewTest : public QObject {
  Q_OBJECT

 private slots:
  void without_a_trace_it_says_how_to_open_one() {
    k3::gui::Document d(k3::DataPaths::under(kSource + "/scenarios"));
    TimelineView view(&d);
    view.resize(1400, 800);
    const QImage image = view.grab().toImage();
    QVERIFY(!image.isNull());
    QVERIFY(view.canvas()->track_labels().empty());
    QVERIFY(view.stats_text().contains("No trace"));
    QCOMPARE(view.tree_model()->rowCount(), 0);
  }

  void rows_that_do_not_fit_scroll_under_the_ruler() {
    k3::gui::Document d(k3::DataPaths::under(kSource + "/scenarios"));
    d.open(kRun + "/trace_decode_b1_ctx131072.json.gz");
    TimelineCanvas standalone;
    TimelineCanvas* canvas = &standalone;
    canvas->set_index(std::make_shared<const k3::gui::TimelineIndex>(d.trace_ptr(), nullptr));
    canvas->setMinimumSize(0, 0);
    canvas->resize(800, 90);  // room for two or three of the four tracks
    QImage image(800, 90, QImage::Format_ARGB32_Premultiplied);
    canvas->render(&image);
    QCOMPARE(canvas->last_first_track(), 0);
    canvas->scroll_rows(1);
    canvas->render(&image);
    QCOMPARE(canvas->last_first_track(), 1);
    canvas->scroll_rows(100);  // clamped: the last track stays in view
    const double bottom = canvas->scroll_px();
    canvas->render(&image);
    QVERIFY(canvas->last_first_track() >= 1 && canvas->last_first_track() <= 3);
    canvas->scroll_rows(1);
    QCOMPARE(canvas->scroll_px(), bottom);
    canvas->scroll_rows(-100);
    QCOMPARE(canvas->scroll_px(), 0.0);
  }

  void a_recorded_trace_draws_its_tracks_and_follows_the_selection() {
    k3::gui::Document d(k3::DataPaths::under(kSource + "/scenarios"));
    TimelineView view(&d);
    d.open(kRun + "/pred_decode_b1_ctx131072.json");
    d.open(kRun + "/trace_decode_b1_ctx131072.json.gz");
    view.resize(1600, 900);
    view.show();
    const QImage image = view.grab().toImage();
    QVERIFY(colours(image) > 20);
    const auto& labels = view.canvas()->track_labels();
    QCOMPARE(labels, (std::vector<QString>{"steps", "predicted", "GPU 0 ops", "GPU 0 stream 13"}));
    // Fully zoomed out: the whole trace, its 2928 GPU events drawn in at most a few spans per pixel.
    TimelineCanvas* canvas = view.canvas();
    QVERIFY(canvas->view_t0_ns() <= view.index()->begin_ns() && canvas->view_t1_ns() >= view.index()->end_ns());
    QVERIFY(canvas->last_drawn_spans() > 50 && canvas->last_drawn_spans() < 4 * 1600);
    QCOMPARE(view.tree_model()->rowCount(), 24);
    QVERIFY(view.stats_text().contains("2808 kernels"));
    QVERIFY(view.stats_text().contains("moe_experts"));

    // Selecting an op: the distribution shows its 24 instances, the tree's current row is it.
    d.select_op("L004.mla.attn_decode");
    QCOMPARE(view.distribution()->distribution().instances.size(), std::size_t{24});
    // A click on the ops track in the middle of an instance selects that op.
    d.select_op("");
    const auto& ops = view.index()->tracks()[2];
    const std::uint32_t k = 200;
    canvas->set_view(ops.start_ns[k] - 2000, ops.end_ns[k] + 2000);
    QApplication::processEvents();
    const double x = 170 + (canvas->width() - 174) / 2.0;
    const double y = 30 + 4 + 2 * (26 + 3) + 13;
    QTest::mouseClick(canvas, Qt::LeftButton, Qt::NoModifier, QPoint(static_cast<int>(x), static_cast<int>(y)));
    QCOMPARE(d.selected_op(), view.index()->info(2, k).op);

    // W zooms in around the middle; S zooms back out.
    const std::int64_t width = canvas->view_t1_ns() - canvas->view_t0_ns();
    canvas->setFocus();
    QTest::keyClick(canvas, Qt::Key_W);
    QVERIFY(canvas->view_t1_ns() - canvas->view_t0_ns() < width);
    QTest::keyClick(canvas, Qt::Key_S);
    QVERIFY(std::llabs(canvas->view_t1_ns() - canvas->view_t0_ns() - width) <= 2);
    QTest::keyClick(canvas, Qt::Key_0);
    QVERIFY(canvas->view_t0_ns() <= view.index()->begin_ns());

    // Search: a kernel substring, counted against the trace's rows.
    view.search_box()->setText("splitkreduce");
    const k3::profiler::Trace& trace = *d.trace();
    std::size_t brute = 0;
    for (std::size_t i = 0; i < trace.size(); ++i) {
      brute += trace.kind[i] == k3::profiler::EventKind::kernel &&
               trace.name_of(i).find("splitKreduce") != std::string::npos;
    }
    QVERIFY(brute > 0);
    QCOMPARE(view.search_count(), QStringLiteral("%1 matches").arg(brute));
  }
};

QTEST_MAIN(TimelineViewTest)
#include "timeline_view_test.moc"
