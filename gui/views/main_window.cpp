#include "gui/views/main_window.h"

#include "core/error.h"
#include "gui/model/document.h"
#include "gui/views/view_list.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QScrollArea>
#include <QSettings>
#include <QStatusBar>
#include <QTabWidget>

#include <cstdio>

namespace k3::gui {
namespace {
constexpr int kMaxRecent = 10;
}

MainWindow::MainWindow(Document* document, QWidget* parent) : QMainWindow(parent), document_(document) {
  setObjectName("k3perf-main-window");
  setWindowTitle("k3perf");
  setAcceptDrops(true);
  resize(1600, 1000);

  tabs_ = new QTabWidget(this);
  tabs_->setDocumentMode(true);
  for (const ViewInfo& v : views()) {
    QWidget* w = v.make(document_, tabs_);
    w->setObjectName(QString::fromStdString(v.slug));
    tabs_->addTab(w, v.title);
  }
  setCentralWidget(tabs_);

  auto* dock = new QDockWidget("What-if", this);
  dock->setObjectName("whatif-dock");
  dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
  auto* scroll = new QScrollArea(dock);
  scroll->setWidgetResizable(true);
  whatif_ = whatif_panel().make(document_, scroll);
  whatif_->setObjectName("whatif");
  scroll->setWidget(whatif_);
  dock->setWidget(scroll);
  addDockWidget(Qt::LeftDockWidgetArea, dock);

  status_ = new QLabel(this);
  statusBar()->addPermanentWidget(status_, 1);
  build_menus();
  connect(document_, &Document::prediction_changed, this, &MainWindow::update_status);
  connect(document_, &Document::trace_changed, this, &MainWindow::update_status);
  connect(document_, &Document::comparison_changed, this, &MainWindow::update_status);
  update_status();

  QSettings settings;
  restoreGeometry(settings.value("window/geometry").toByteArray());
  restoreState(settings.value("window/state").toByteArray());
  tabs_->setCurrentIndex(settings.value("window/tab", 0).toInt());
}

void MainWindow::build_menus() {
  QMenu* file = menuBar()->addMenu("&File");
  QAction* open = file->addAction("&Open…", this, [this] {
    const QString path =
        QFileDialog::getOpenFileName(this, "Open a scenario, prediction, trace or comparison", QString(),
                                     "k3perf files (*.yaml *.yml *.json *.json.gz);;All files (*)");
    if (!path.isEmpty()) open_path(path);
  });
  open->setShortcut(QKeySequence::Open);
  file->addAction("Open &folder…", this, [this] {
    const QString path = QFileDialog::getExistingDirectory(this, "Open a folder of runs (e.g. a bench/results run)");
    if (!path.isEmpty()) open_path(path);
  });
  recent_menu_ = file->addMenu("&Recent");
  refresh_recent_menu();
  file->addSeparator();
  QAction* quit = file->addAction("&Quit", this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  QMenu* scenario = menuBar()->addMenu("&Scenario");
  scenario->addAction("&Pin as baseline", document_, &Document::pin_baseline)->setShortcut(QKeySequence("Ctrl+B"));
  scenario->addAction("&Clear baseline", document_, &Document::clear_baseline);
  scenario->addAction("&Reset what-ifs", document_, &Document::clear_edits);
}

bool MainWindow::open_path(const QString& path) {
  try {
    const std::vector<std::string> opened = document_->open(path.toStdString());
    remember(path);
    statusBar()->showMessage(QString("opened %1 file(s) from %2").arg(opened.size()).arg(path), 8000);
    return true;
  } catch (const Error& e) {
    statusBar()->showMessage(QString::fromStdString(e.what()), 15000);
    if (!isVisible()) std::fprintf(stderr, "k3perf-gui: %s\n", e.what());
    if (isVisible()) QMessageBox::warning(this, "k3perf: cannot open", QString::fromStdString(e.what()));
    return false;
  }
}

QStringList MainWindow::recent_files() const { return QSettings().value("recent").toStringList(); }

void MainWindow::remember(const QString& path) {
  QStringList recent = recent_files();
  const QString absolute = QFileInfo(path).absoluteFilePath();
  recent.removeAll(absolute);
  recent.prepend(absolute);
  while (recent.size() > kMaxRecent) recent.removeLast();
  QSettings().setValue("recent", recent);
  refresh_recent_menu();
}

void MainWindow::refresh_recent_menu() {
  recent_menu_->clear();
  const QStringList recent = recent_files();
  for (const QString& path : recent) {
    recent_menu_->addAction(path, this, [this, path] { open_path(path); });
  }
  recent_menu_->setEnabled(!recent.isEmpty());
}

void MainWindow::update_status() {
  QStringList parts;
  if (const auto& p = document_->prediction()) {
    parts << QString::fromStdString(p->title());
    if (document_->has_scenario()) parts << QString("predicted in %1 ms").arg(document_->last_predict_ms(), 0, 'f', 1);
  }
  if (document_->trace()) {
    parts << QString("trace %1 (%2 events)")
                 .arg(QFileInfo(QString::fromStdString(document_->trace_origin())).fileName())
                 .arg(document_->trace()->size());
  }
  if (!document_->error().empty()) parts << QString("error: %1").arg(QString::fromStdString(document_->error()));
  status_->setText(parts.join("   ·   "));
  if (const auto& p = document_->prediction()) setWindowTitle("k3perf — " + QString::fromStdString(p->title()));
}

void MainWindow::closeEvent(QCloseEvent* event) {
  QSettings settings;
  settings.setValue("window/geometry", saveGeometry());
  settings.setValue("window/state", saveState());
  settings.setValue("window/tab", tabs_->currentIndex());
  QMainWindow::closeEvent(event);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
  for (const QUrl& url : event->mimeData()->urls()) {
    if (url.isLocalFile()) open_path(url.toLocalFile());
  }
}

}  // namespace k3::gui
