// YAML through YamlNode, then as a hardware file (core/hardware): sources, peaks, links, collective tables.
#include "core/hardware.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  return k3::fuzz::parse_text(data, size, [](const std::string& text) { k3::parse_hardware(text, "fuzz.yaml"); });
}
