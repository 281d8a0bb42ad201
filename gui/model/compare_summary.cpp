#include "gui/model/compare_summary.h"

#include "gui/model/compare_format.h"

#include <algorithm>

namespace k3::gui {

QStringList summary_lines(const CompareData& c) {
  using namespace compare;
  QStringList lines;
  lines << QString(
               "%1 ops measured of %2 predicted · %3 predicted, not measured · %4 measured, not predicted · "
               "%5 fused into their host")
               .arg(c.ops.size())
               .arg(c.ops.size() + c.not_measured.size())
               .arg(c.not_measured.size())
               .arg(c.not_predicted.size())
               .arg(c.fused.size());
  lines << QString(
               "coverage %1 % of kernel time (%2 of %3 µs; %4 of %5 kernels on predicted ops) · %6 kernel names on "
               "no op")
               .arg(percent_text(c.coverage_percent), us_text(c.kernel_time_on_predicted_ops_us),
                    us_text(c.kernel_time_us))
               .arg(c.kernels_on_predicted_ops)
               .arg(c.kernels)
               .arg(c.unattributed_kernels.size());
  if (!c.by_step.empty()) {
    const auto [lo, hi] = std::minmax_element(
        c.by_step.begin(), c.by_step.end(), [](const auto& a, const auto& b) { return a.measured_us < b.measured_us; });
    // Every step holds the same ops, so the predicted sum is one number; the steps' measured sums vary.
    const double predicted = c.by_step.front().predicted_us;
    const double measured = c.median_step_measured_us();
    lines << QString(
                 "step, summed over the measured ops: predicted %1 µs, measured %2 µs (median of %3 steps, %4–%5), "
                 "error %6 % · median |error| per op %7 %")
                 .arg(us_text(predicted), us_text(measured))
                 .arg(c.by_step.size())
                 .arg(us_text(lo->measured_us), us_text(hi->measured_us),
                      signed_percent_text(measured > 0 ? 100 * (predicted - measured) / measured : 0.0),
                      percent_text(c.median_abs_error_percent));
  }
  if (c.has_counters) {
    lines << QString(
                 "counters (%1), one step over the measured ops: predicted %2 MB, DRAM %3 MB · median |error| %4 % "
                 "(bytes), %5 % (tensor FLOPs)")
                 .arg(QString::fromStdString(c.counters_origin), megabytes_text(c.counters_predicted_bytes),
                      megabytes_text(c.counters_measured_bytes),
                      percent_text(c.counters_median_abs_bytes_error_percent),
                      percent_text(c.counters_median_abs_flops_error_percent));
  }
  return lines;
}

}  // namespace k3::gui
