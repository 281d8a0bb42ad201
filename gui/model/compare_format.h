// How the Compare models show their numbers (units in the column titles, plain numbers in the cells) and
// the roles their views sort and filter by. UI-free.
#pragma once

#include <QString>
#include <QVariant>

#include <optional>

namespace k3::gui::compare {

// The raw value a column sorts by: numbers as double (errors by magnitude, "none" as −1), text as text.
inline constexpr int kSortRole = Qt::UserRole + 1;
// On column 0: the row's searchable text ("name kind bound").
inline constexpr int kFilterRole = Qt::UserRole + 2;

QString us_text(double us);                            // "2073.88"
QString signed_us_text(double us);                     // "+12.30", "−0.51"
QString signed_percent_text(std::optional<double> p);  // "+12.3", "−82.8", "—" for none
QString percent_text(std::optional<double> p);         // "99.3", "—" for none
QString megabytes_text(double bytes);                  // "28.67" (MB = 10⁶ bytes, as the CLI prints)
QString gigaflop_text(double flops);                   // "1.234" (GFLOP)
QString gigabytes_per_s_text(double bytes_per_s);      // "963.6"

// Cells right-aligned for numbers, left for text.
QVariant alignment(bool numeric);

}  // namespace k3::gui::compare
