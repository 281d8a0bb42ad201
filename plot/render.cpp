// PNG and SVG files of a Chart, both drawn by the one painter (plot/painter.h): onto a QImage, or a
// QSvgGenerator. Qt needs a QGuiApplication for fonts; without one we start one on the "offscreen"
// platform, so no display is needed. Built with Qt 6 Gui and Svg (K3PERF_HAVE_QT); without them both
// writers refuse with an InputError saying what to install.
#include "core/error.h"
#include "plot/chart.h"

#ifdef K3PERF_HAVE_QT
#include "plot/painter.h"

#include <QBuffer>
#include <QByteArray>
#include <QColor>
#include <QGuiApplication>
#include <QImage>
#include <QPainter>
#include <QSvgGenerator>

#include <cstdlib>
#endif

namespace k3::plot {

#ifdef K3PERF_HAVE_QT

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

void check_size(const Chart& chart) {
  K3_CHECK(chart.width_px >= 200 && chart.height_px >= 150, "chart of {}x{} px is too small", chart.width_px,
           chart.height_px);
}

}  // namespace

std::string to_png(const Chart& chart) {
  check_size(chart);
  ensure_gui_application();
  QImage image(chart.width_px, chart.height_px, QImage::Format_ARGB32);
  image.fill(QColor("#FFFFFF"));
  {
    QPainter painter(&image);
    paint_chart(chart, painter, QRectF(0, 0, chart.width_px, chart.height_px));
  }
  QByteArray bytes;
  QBuffer buffer(&bytes);
  buffer.open(QIODevice::WriteOnly);
  K3_CHECK(image.save(&buffer, "PNG"), "Qt could not encode a {}x{} PNG", chart.width_px, chart.height_px);
  return std::string(bytes.constData(), static_cast<std::size_t>(bytes.size()));
}

std::string to_svg(const Chart& chart) {
  check_size(chart);
  ensure_gui_application();
  QByteArray bytes;
  QBuffer buffer(&bytes);
  buffer.open(QIODevice::WriteOnly);
  QSvgGenerator svg;
  svg.setOutputDevice(&buffer);
  svg.setSize(QSize(chart.width_px, chart.height_px));
  svg.setViewBox(QRect(0, 0, chart.width_px, chart.height_px));
  svg.setResolution(96);  // the fonts' pixel sizes are the PNG's
  svg.setTitle(QString::fromStdString(chart.title));
  {
    QPainter painter(&svg);
    paint_chart(chart, painter, QRectF(0, 0, chart.width_px, chart.height_px));
  }
  // UTF-8 needs no XML declaration: the file opens with <svg>.
  std::string text(bytes.constData(), static_cast<std::size_t>(bytes.size()));
  if (text.rfind("<?xml", 0) == 0) text.erase(0, text.find('\n') + 1);
  return text;
}

#else

namespace {
[[noreturn]] void no_qt() {
  throw InputError("plots need Qt 6 (Debian qt6-base-dev, qt6-svg-dev); this k3perf was built without it");
}
}  // namespace

std::string to_png(const Chart&) { no_qt(); }
std::string to_svg(const Chart&) { no_qt(); }

#endif

}  // namespace k3::plot
