// The chart widget: it paints the painter's chart, finds the point under the mouse, tells its values and
// the caller's label for it, emits point_clicked, and rings the highlighted point.
#include "gui/views/chart_widget.h"

#include <QHelpEvent>
#include <QImage>
#include <QSignalSpy>
#include <QTest>
#include <QToolTip>

using k3::gui::ChartWidget;
using k3::plot::Chart;
using k3::plot::Series;
using k3::plot::SeriesStyle;

namespace {

Chart two_series() {
  Chart c;
  c.title = "Pareto front";
  c.x_label = "tokens/s per GPU";
  c.y_label = "tokens/s per user";
  c.series.push_back({"all", {{0, 0}, {50, 100}, {100, 40}}, SeriesStyle::scatter});
  c.series.push_back({"front", {{20, 10}, {80, 90}}, SeriesStyle::line_and_markers});
  return c;
}

int non_white_pixels(const QImage& image) {
  int n = 0;
  for (int y = 0; y < image.height(); ++y) {
    for (int x = 0; x < image.width(); ++x) n += image.pixel(x, y) != qRgb(255, 255, 255);
  }
  return n;
}

}  // namespace

class ChartWidgetTest : public QObject {
  Q_OBJECT

 private slots:
  void paints_the_chart_and_finds_its_points() {
    ChartWidget w;
    w.set_chart(two_series(), {{}, {"h200-sxm tp8 dp2 ep8 b16 t4096 agg", "b200 tp8 dp4 ep8 b16 t4096 agg"}});
    w.resize(640, 400);
    const QImage image = w.grab().toImage();
    QCOMPARE(image.width(), 640);
    QVERIFY(non_white_pixels(image) > 640 * 400 / 100);
    QVERIFY(QRectF(w.rect()).contains(w.frame().plot_area));
    QCOMPARE(w.frame().x_max, 100.0);

    const QPointF p = w.frame().to_px(80, 90);
    QCOMPARE(w.nearest_point(p + QPointF(3, -2)), std::make_pair(1, 1));
    QCOMPARE(w.nearest_point(w.frame().to_px(50, 100)), std::make_pair(0, 1));
    QCOMPARE(w.nearest_point(w.frame().to_px(60, 50)), std::make_pair(-1, -1));  // nothing within 12 px
    QCOMPARE(w.point_text(1, 1),
             QString("front\ntokens/s per GPU: 80.00\ntokens/s per user: 90.00\nb200 tp8 dp4 ep8 b16 t4096 agg"));
    QCOMPARE(w.point_text(0, 2), QString("all\ntokens/s per GPU: 100.00\ntokens/s per user: 40.00"));
  }

  void hovering_shows_the_point_and_clicking_emits_it() {
    ChartWidget w;
    w.set_chart(two_series(), {{"a", "b", "c"}});
    w.resize(640, 400);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    const QPoint at = w.frame().to_px(100, 40).toPoint();
    QHelpEvent help(QEvent::ToolTip, at, w.mapToGlobal(at));
    QApplication::sendEvent(&w, &help);
    QCOMPARE(QToolTip::text(), w.point_text(0, 2));
    QVERIFY(QToolTip::text().endsWith("\nc"));

    QSignalSpy clicked(&w, &ChartWidget::point_clicked);
    QTest::mouseClick(&w, Qt::LeftButton, {}, at);
    QCOMPARE(clicked.count(), 1);
    QCOMPARE(clicked[0][0].toInt(), 0);
    QCOMPARE(clicked[0][1].toInt(), 2);
    QTest::mouseClick(&w, Qt::LeftButton, {}, w.frame().to_px(60, 50).toPoint());
    QCOMPARE(clicked.count(), 1);  // no point there
  }

  void rings_the_highlighted_point() {
    ChartWidget w;
    w.set_chart(two_series());
    w.resize(640, 400);
    const QImage before = w.grab().toImage();
    w.set_highlight(1, 0);
    const QImage after = w.grab().toImage();
    const QPoint ring = (w.frame().to_px(20, 10) + QPointF(8, 0)).toPoint();  // on the ring, right of the point
    QCOMPARE(before.pixel(ring), qRgb(255, 255, 255));                        // grid lines are at ticks, not here
    int darkest = 255;  // the ring's 2 px antialiased pen, within a pixel of its radius
    for (int dy = -1; dy <= 1; ++dy) {
      for (int dx = -1; dx <= 1; ++dx) darkest = std::min(darkest, qGray(after.pixel(ring + QPoint(dx, dy))));
    }
    QVERIFY2(darkest < 100, qPrintable(QString::number(darkest)));
    w.set_highlight(-1, -1);
    QCOMPARE(w.grab().toImage(), before);
  }
};

QTEST_MAIN(ChartWidgetTest)
#include "chart_widget_test.moc"
