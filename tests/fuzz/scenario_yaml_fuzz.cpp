// A deployment scenario through its loader (core/scenario: model and hardware by name from the data folder, then
// validate), and the prediction of the step it describes (sim/predict).
#include "core/scenario.h"
#include "fuzz_data.h"
#include "fuzz_target.h"
#include "sim/predict.h"

K3PERF_FUZZ_TEXT_TARGET(scenario_yaml) {
  const k3::Scenario s = k3::parse_scenario(text, "fuzz.yaml", k3::fuzz::data());
  k3::validate(s);
  k3::predict(s);
}
