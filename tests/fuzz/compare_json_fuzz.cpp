// A `k3perf compare --json` file as the GUI opens it (gui/model/compare_data, through the bounded JSON reader).
#include "core/json_reader.h"
#include "fuzz_target.h"
#include "gui/model/compare_data.h"

K3PERF_FUZZ_TEXT_TARGET(compare_json) {
  k3::gui::compare_from_json(k3::parse_ordered_json(text, "fuzz.json"), "fuzz.json");
}
