// JSON through parse_json and JsonNode, then as a Hugging Face config.json (core/model_config).
#include "core/error.h"
#include "core/json_reader.h"
#include "core/model_config.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    k3::parse_model_config(text, "fuzz.json");
  } catch (const k3::InputError&) {
  }
  return 0;
}
