// The window: the what-if editor docked at the left, the views as tabs, File → Open (scenario, prediction,
// trace, compare JSON or a folder of them; drag and drop; recent files), Scenario → Pin baseline, and the
// window's geometry, dock layout and tab restored from QSettings.
#pragma once

#include <QMainWindow>
#include <QStringList>

class QTabWidget;
class QMenu;
class QLabel;

namespace k3::gui {

class Document;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(Document* document, QWidget* parent = nullptr);

  // Opens a file or folder through the Document; errors go to a message box (and the status bar).
  bool open_path(const QString& path);
  QTabWidget* tabs() const { return tabs_; }
  QWidget* whatif() const { return whatif_; }
  QStringList recent_files() const;

 protected:
  void closeEvent(QCloseEvent* event) override;
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;

 private:
  void build_menus();
  void refresh_recent_menu();
  void remember(const QString& path);
  void update_status();

  Document* document_;
  QTabWidget* tabs_ = nullptr;
  QWidget* whatif_ = nullptr;
  QMenu* recent_menu_ = nullptr;
  QLabel* status_ = nullptr;
};

}  // namespace k3::gui
