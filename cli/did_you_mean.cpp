// "did you mean": the verb or option nearest to an unknown one, by edit distance (cli/commands.h).
#include "cli/commands.h"

#include <algorithm>
#include <vector>

namespace k3::cli {

namespace {

// Levenshtein distance: insertions, deletions and substitutions, one each.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

}  // namespace

std::string did_you_mean(const CLI::App& app) {
  // The verb the arguments reached, and the first argument it did not take.
  const CLI::App* at = &app;
  while (!at->get_subcommands().empty()) at = at->get_subcommands().front();
  const std::vector<std::string> left = app.remaining(true);  // an unknown option of a verb is passed up to k3perf
  if (left.empty()) return "";
  const std::string unknown = left.front().substr(0, left.front().find('='));
  std::vector<std::string> names;
  const bool option = unknown.rfind("-", 0) == 0;
  if (option) {
    for (const CLI::App* a = at; a; a = a->get_parent()) {
      for (const CLI::Option* o : a->get_options()) {
        for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
      }
    }
  } else if (at == &app) {
    for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  }
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, unknown.size() / 3) + 1;
  for (const std::string& n : names) {
    const std::size_t d = edit_distance(unknown, n);
    if (d < best_distance) {
      best = n;
      best_distance = d;
    }
  }
  if (best.empty()) return "";
  return "'" + unknown + "': did you mean '" + best + "'?";
}

}  // namespace k3::cli
