// k3perf-gui [files or folders…]: the window, opened on the embedded default scenario and then on each
// argument in turn. --screenshot DIR renders every view to DIR/<view>.png and exits (no display needed:
// QT_QPA_PLATFORM=offscreen).
#include "cli/default_scenario.h"
#include "core/data_paths.h"
#include "core/error.h"
#include "gui/model/document.h"
#include "gui/views/main_window.h"
#include "gui/views/view_list.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QElapsedTimer>
#include <QTabWidget>
#include <QThread>

#include <cstdio>

namespace {

constexpr qint64 kMaxWaitMs = 300'000;  // the slowest background view (plan, verify) on a 2-core machine

// Renders the window, each tab and the what-if panel; returns the number of files written.
int write_screenshots(k3::gui::MainWindow& window, const QString& dir) {
  QDir().mkpath(dir);
  window.resize(1600, 1000);
  window.show();
  int written = 0;
  const auto save = [&](QWidget* w, const QString& name) {
    QApplication::processEvents();
    // A view that computes in the background says so with a "busy" property; wait for its content.
    QElapsedTimer waited;
    waited.start();
    while (w->property("busy").toBool() && waited.elapsed() < kMaxWaitMs) {
      QApplication::processEvents(QEventLoop::AllEvents, 100);
      QThread::msleep(20);
    }
    const QString path = QDir(dir).filePath(name + ".png");
    if (w->grab().save(path)) {
      std::printf("wrote %s\n", path.toStdString().c_str());
      ++written;
    } else {
      std::fprintf(stderr, "k3perf-gui: cannot write %s\n", path.toStdString().c_str());
    }
  };
  QTabWidget* tabs = window.tabs();
  for (int i = 0; i < tabs->count(); ++i) {
    tabs->setCurrentIndex(i);
    save(tabs->widget(i), tabs->widget(i)->objectName());
  }
  save(window.whatif(), "whatif");
  if (tabs->count() > 0) tabs->setCurrentIndex(0);
  save(&window, "window");
  return written;
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName("k3perf-gui");
  QApplication::setOrganizationName("k3perf");

  QCommandLineParser parser;
  parser.setApplicationDescription("k3perf: predictions, traces and their comparison in one window");
  parser.addHelpOption();
  QCommandLineOption screenshot("screenshot", "render every view to DIR/<view>.png and exit", "DIR");
  QCommandLineOption data_dir("data-dir", "scenarios folder (models/, hardware/, claims/)", "DIR");
  parser.addOption(screenshot);
  parser.addOption(data_dir);
  parser.addPositionalArgument("files", "scenario YAML, prediction JSON, trace, compare JSON or folder", "[files…]");
  parser.process(app);

  try {
    k3::gui::Document document(k3::DataPaths::resolve(parser.value(data_dir).toStdString()));
    document.set_scenario(k3::cli::kDefaultScenarioYaml,
                          std::string("<embedded default: ") + k3::cli::kDefaultScenarioFile + ">");
    k3::gui::MainWindow window(&document);
    bool all_opened = true;
    for (const QString& path : parser.positionalArguments()) all_opened = window.open_path(path) && all_opened;
    if (parser.isSet(screenshot)) {
      if (!all_opened) return 2;
      return write_screenshots(window, parser.value(screenshot)) > 0 ? 0 : 1;
    }
    window.show();
    return QApplication::exec();
  } catch (const k3::Error& e) {
    std::fprintf(stderr, "k3perf-gui: %s\n", e.what());
    return 2;
  }
}
