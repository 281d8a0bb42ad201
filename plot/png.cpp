// PNG writer for plot::Chart: the laid-out Scene painted with Qt 6 QPainter on a QImage. Qt needs
// a QGuiApplication for fonts; without one we start one on the "offscreen" platform, so no display
// is needed. Built only where Qt 6 Gui is found (K3PERF_PLOT_HAVE_QT).
#include "plot/chart.h"

#include "core/error.h"

#ifdef K3PERF_PLOT_HAVE_QT
#include <QBuffer>
#include <QByteArray>
#include <QColor>
#include <QFont>
#include <QFontMetricsF>
#include <QGuiApplication>
#include <QImage>
#include <QPainter>
#include <QPen>
#include <QPolygonF>

#include <cstdlib>
#endif

namespace k3::plot {

#ifdef K3PERF_PLOT_HAVE_QT

namespace {

void ensure_gui_application() {
  if (QGuiApplication::instance()) return;
  // Kept for the life of the process: Qt refers to argc/argv and the application until exit.
  static int argc = 1;
  static char name[] = "k3perf";
  static char* argv[] = {name, nullptr};
  if (!std::getenv("QT_QPA_PLATFORM")) setenv("QT_QPA_PLATFORM", "offscreen", 0);
  static QGuiApplication* app = new QGuiApplication(argc, argv);
  (void)app;
}

}  // namespace

bool png_supported() { return true; }

std::string to_png(const Chart& chart) {
  ensure_gui_application();
  const Scene s = layout(chart);
  QImage image(s.width_px, s.height_px, QImage::Format_ARGB32);
  image.fill(QColor("#FFFFFF"));
  {
    QPainter p(&image);
    p.setRenderHint(QPainter::Antialiasing, true);
    p.setRenderHint(QPainter::TextAntialiasing, true);
    for (const Scene::Line& l : s.lines) {
      p.setPen(QPen(QColor(QString::fromStdString(l.color)), l.width));
      p.drawLine(QPointF(l.x1, l.y1), QPointF(l.x2, l.y2));
    }
    for (const Scene::Polyline& pl : s.polylines) {
      QPen pen(QColor(QString::fromStdString(pl.color)), pl.width);
      pen.setJoinStyle(Qt::RoundJoin);
      p.setPen(pen);
      QPolygonF poly;
      for (auto [x, y] : pl.points) poly << QPointF(x, y);
      p.drawPolyline(poly);
    }
    p.setPen(Qt::NoPen);
    for (const Scene::Marker& m : s.markers) {
      p.setBrush(QColor(QString::fromStdString(m.color)));
      p.drawEllipse(QPointF(m.x, m.y), m.radius, m.radius);
    }
    p.setPen(QColor("#222222"));
    for (const Scene::Text& t : s.texts) {
      QFont font("DejaVu Sans");
      font.setPixelSize(static_cast<int>(t.size_px));
      font.setBold(t.bold);
      p.setFont(font);
      const QString text = QString::fromStdString(t.text);
      const double w = QFontMetricsF(font).horizontalAdvance(text);
      const double dx = t.anchor == Scene::Anchor::start ? 0 : t.anchor == Scene::Anchor::middle ? -w / 2 : -w;
      p.save();
      p.translate(t.x, t.y);
      if (t.vertical) p.rotate(-90);
      p.drawText(QPointF(dx, 0), text);
      p.restore();
    }
  }
  QByteArray bytes;
  QBuffer buffer(&bytes);
  buffer.open(QIODevice::WriteOnly);
  K3_CHECK(image.save(&buffer, "PNG"), "Qt could not encode a {}x{} PNG", s.width_px, s.height_px);
  return std::string(bytes.constData(), static_cast<std::size_t>(bytes.size()));
}

#else

bool png_supported() { return false; }

std::string to_png(const Chart&) {
  throw InputError("this k3perf was built without Qt 6 Gui, which writes PNG; write the plot as .svg instead");
}

#endif

}  // namespace k3::plot
