#include "gui/model/timeline_format.h"

#include <fmt/format.h>

#include <cmath>

namespace k3::gui {

std::string format_duration_ns(double ns) {
  const double a = std::fabs(ns);
  const auto three = [](double v, const char* unit) {
    const double m = std::fabs(v);
    return fmt::format("{:.{}f} {}", v, m >= 100 ? 0 : (m >= 10 ? 1 : 2), unit);
  };
  if (a < 1e3) return fmt::format("{:.0f} ns", ns);
  if (a < 1e6) return three(ns / 1e3, "µs");
  if (a < 1e9) return three(ns / 1e6, "ms");
  return three(ns / 1e9, "s");
}

std::string short_kernel_name(const std::string& name) {
  std::string s = name;
  // The return type of a demangled function ("void f<…>(…)"): the first space before any bracket.
  const std::size_t bracket = s.find_first_of("<(");
  const std::size_t space = s.find(' ');
  if (space != std::string::npos && (bracket == std::string::npos || space < bracket)) s = s.substr(space + 1);
  // Template arguments and the parameter list, at nesting depth 0.
  std::string out;
  int depth = 0;
  for (char c : s) {
    if (c == '<' || c == '(') {
      ++depth;
    } else if (c == '>' || c == ')') {
      if (depth > 0) --depth;
    } else if (depth == 0) {
      out += c;
    }
  }
  return out.empty() ? name : out;
}

}  // namespace k3::gui
