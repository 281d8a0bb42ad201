// The views of the main window, in tab order: one class per view, each a QWidget over the Document.
// Adding a view is one file pair in gui/views/ and one line in view_list.cpp.
#pragma once

#include <QString>
#include <QWidget>

#include <functional>
#include <string>
#include <vector>

namespace k3::gui {

class Document;

struct ViewInfo {
  std::string slug;  // file name of its screenshot: "breakdown" -> breakdown.png
  QString title;     // tab title
  std::function<QWidget*(Document*, QWidget* parent)> make;
};

const std::vector<ViewInfo>& views();
// The what-if editor, docked beside the tabs (its screenshot is whatif.png).
const ViewInfo& whatif_panel();

}  // namespace k3::gui
