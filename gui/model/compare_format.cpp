#include "gui/model/compare_format.h"

#include <cmath>

namespace k3::gui::compare {
namespace {
const QString kNone = QStringLiteral("—");
const QChar kMinus(0x2212);

// A fixed-point number with an explicit sign, the minus as U+2212 so columns line up.
QString signed_fixed(double v, int decimals) {
  const QString magnitude = QString::number(std::fabs(v), 'f', decimals);
  if (magnitude.toDouble() == 0) return magnitude;
  return (v < 0 ? QString(kMinus) : QStringLiteral("+")) + magnitude;
}
}  // namespace

QString us_text(double us) { return QString::number(us, 'f', 2); }
QString signed_us_text(double us) { return signed_fixed(us, 2); }
QString signed_percent_text(std::optional<double> p) { return p ? signed_fixed(*p, 1) : kNone; }
QString percent_text(std::optional<double> p) { return p ? QString::number(*p, 'f', 1) : kNone; }
QString megabytes_text(double bytes) { return QString::number(bytes / 1e6, 'f', 2); }
QString gigaflop_text(double flops) { return QString::number(flops / 1e9, 'f', 3); }
QString gigabytes_per_s_text(double bytes_per_s) { return QString::number(bytes_per_s / 1e9, 'f', 1); }

QVariant alignment(bool numeric) {
  return QVariant::fromValue(
      Qt::Alignment(numeric ? Qt::AlignRight | Qt::AlignVCenter : Qt::AlignLeft | Qt::AlignVCenter));
}

}  // namespace k3::gui::compare
