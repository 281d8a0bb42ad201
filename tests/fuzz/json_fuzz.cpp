// JSON through parse_json and JsonNode, then as a Hugging Face config.json (core/model_config).
#include "core/model_config.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  return k3::fuzz::parse_text(data, size, [](const std::string& text) { k3::parse_model_config(text, "fuzz.json"); });
}
