#include "cli/commands.h"

#include <algorithm>
#include <cctype>
#include <climits>

namespace k3::cli {

void set_help_footer(CLI::App& cmd, const std::string& example, std::vector<ExitStatusLine> statuses) {
  const auto has = [&](const std::string& status) {
    return std::any_of(statuses.begin(), statuses.end(), [&](const ExitStatusLine& l) { return l.status == status; });
  };
  for (const ExitStatusLine& common :
       std::vector<ExitStatusLine>{{"0", "done"},
                                   {"2",
                                    "a usage error or bad input (the message names the file, key or flag, and "
                                    "the value)"},
                                   {"3", "an internal error"}}) {
    if (!has(common.status)) statuses.push_back(common);
  }
  // By number; a line that is not one (the program's own status) last.
  const auto key = [](const ExitStatusLine& l) {
    return std::isdigit(static_cast<unsigned char>(l.status[0])) ? std::stoi(l.status) : INT_MAX;
  };
  std::stable_sort(statuses.begin(), statuses.end(),
                   [&](const ExitStatusLine& a, const ExitStatusLine& b) { return key(a) < key(b); });
  std::string text = "Example (run from the repository root):\n  " + example + "\n\nExit status:\n";
  for (const ExitStatusLine& l : statuses) text += "  " + l.status + "  " + l.meaning + "\n";
  cmd.footer(text);
}

}  // namespace k3::cli
