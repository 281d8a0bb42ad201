// k3perf-gui [files or folders…] [--baseline] [--set key=value…]: the window, opened on the embedded default
// scenario and then on each argument in turn; --baseline pins that as the baseline before the --set edits. --screenshot
// DIR renders every view to DIR/<view>.png and exits (no display needed: QT_QPA_PLATFORM=offscreen).
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
  QCommandLineOption set("set", "a what-if edit, as predict's --set (repeatable)", "KEY=VALUE");
  QCommandLineOption baseline("baseline", "pin the scenario as the baseline before the --set edits");
  parser.addOption(set);
  parser.addOption(baseline);
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
    if (parser.isSet(baseline)) document.pin_baseline();
    for (const QString& edit : parser.values(set)) {
      const qsizetype eq = edit.indexOf('=');
      if (eq <= 0) {
        std::fprintf(stderr, "k3perf-gui: --set %s: expected KEY=VALUE\n", edit.toStdString().c_str());
        return 2;
      }
      document.set_edit(edit.left(eq).toStdString(), edit.mid(eq + 1).toStdString());
      // An edit the library refuses stays, as in the editor: the window shows why beside the field.
      if (!document.error().empty()) {
        std::fprintf(stderr, "k3perf-gui: --set %s: %s\n", edit.toStdString().c_str(), document.error().c_str());
      }
    }
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
