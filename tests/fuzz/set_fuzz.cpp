// `--set key.path=value` assignments, one a line, applied to the committed decode scenario as the command line
// applies them (core/yaml_set), then the scenario checked and predicted: tp=4294967296 once divided by zero.
#include "core/scenario.h"
#include "fuzz_data.h"
#include "fuzz_target.h"
#include "sim/predict.h"

#include <sstream>
#include <string>
#include <vector>

K3PERF_FUZZ_TEXT_TARGET(set) {
  std::vector<std::string> sets;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) sets.push_back(line);
  const std::string& base = k3::fuzz::data_file("k3-h200x16-decode-128k.yaml");
  const k3::Scenario s = k3::parse_scenario(base, "k3-h200x16-decode-128k.yaml", k3::fuzz::data(), sets);
  k3::validate(s);
  k3::predict(s);
}
