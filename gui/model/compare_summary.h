// The Compare view's summary, as lines of text: what was joined, coverage, the step's error (sums per step,
// from by_step), and the counters' totals when the comparison holds them. UI-free.
#pragma once

#include "gui/model/compare_data.h"

#include <QStringList>

namespace k3::gui {

QStringList summary_lines(const CompareData& c);

}  // namespace k3::gui
