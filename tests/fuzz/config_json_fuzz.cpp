// A Hugging Face config.json through parse_json, JsonNode and the model config reader (core/model_config), then
// cut to its first layer as make-checkpoint --layers does.
#include "core/model_config.h"
#include "engine/weights/synthetic_checkpoint.h"
#include "fuzz_target.h"

K3PERF_FUZZ_TEXT_TARGET(config_json) {
  k3::parse_model_config(text, "fuzz.json");
  k3::parse_model_config(k3::weights::slice_config_json(text, "fuzz.json", 1), "fuzz.json (sliced)");
}
