#include "gui/views/view_list.h"

#include "gui/views/breakdown_view.h"
#include "gui/views/compare_view.h"
#include "gui/views/profile_view.h"
#include "gui/views/roofline_view.h"
#include "gui/views/serving_view.h"
#include "gui/views/timeline_view.h"
#include "gui/views/whatif_panel.h"

namespace k3::gui {
namespace {
template <class View>
ViewInfo view(std::string slug, QString title) {
  return {std::move(slug), std::move(title),
          [](Document* d, QWidget* parent) -> QWidget* { return new View(d, parent); }};
}
}  // namespace

const std::vector<ViewInfo>& views() {
  static const std::vector<ViewInfo> list = {
      view<BreakdownView>("breakdown", "Breakdown"), view<RooflineView>("roofline", "Roofline"),
      view<TimelineView>("timeline", "Timeline"),    view<CompareView>("compare", "Compare"),
      view<ServingView>("serving", "Serving"),       view<ProfileView>("profile", "Profile"),
  };
  return list;
}

const ViewInfo& whatif_panel() {
  static const ViewInfo info = view<WhatifPanel>("whatif", "What-if");
  return info;
}

}  // namespace k3::gui
