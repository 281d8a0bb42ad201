#include "gui/views/view_list.h"

#include "gui/model/document.h"
#include "gui/views/timeline_view.h"
#include "gui/views/compare_view.h"
#include "gui/views/profile_view.h"
#include "gui/views/serving_view.h"

#include <QLabel>
#include "gui/views/breakdown_view.h"
#include "gui/views/roofline_view.h"
#include "gui/views/whatif_panel.h"

namespace k3::gui {

const std::vector<ViewInfo>& views() {
  static const std::vector<ViewInfo> list = {
      {"timeline", "Timeline", [](Document* d, QWidget* parent) -> QWidget* { return new TimelineView(d, parent); }},
      {"compare", "Compare", [](Document* d, QWidget* parent) -> QWidget* { return new CompareView(d, parent); }},
      {"profile", "Profile", [](Document* d, QWidget* parent) -> QWidget* { return new ProfileView(d, parent); }},
      {"serving", "Serving", [](Document* d, QWidget* parent) -> QWidget* { return new ServingView(d, parent); }},
      {"breakdown", "Breakdown", [](Document* d, QWidget* parent) -> QWidget* { return new BreakdownView(d, parent); }},
      {"roofline", "Roofline", [](Document* d, QWidget* parent) -> QWidget* { return new RooflineView(d, parent); }},
  };
  return list;
}

const ViewInfo& whatif_panel() {
  static const ViewInfo info{"whatif", "What-if",
                             [](Document* d, QWidget* parent) -> QWidget* { return new WhatifPanel(d, parent); }};
  return info;
}

}  // namespace k3::gui
