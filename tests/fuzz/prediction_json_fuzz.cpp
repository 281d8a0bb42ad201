// A `k3perf predict --json` file as compare reads it (profiler/compare/prediction_file) and as the GUI reads it
// (gui/model/prediction_data, through the bounded JSON reader).
#include "core/json_reader.h"
#include "fuzz_target.h"
#include "gui/model/prediction_data.h"
#include "profiler/compare/prediction_file.h"

K3PERF_FUZZ_TEXT_TARGET(prediction_json) {
  try {
    k3::profiler::parse_prediction(text, "fuzz.json");
  } catch (const k3::InputError&) {
  }
  k3::gui::prediction_from_json(k3::parse_ordered_json(text, "fuzz.json"), "fuzz.json");
}
