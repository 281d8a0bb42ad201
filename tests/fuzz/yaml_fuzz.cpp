// YAML through YamlNode, then as a hardware file (core/hardware): sources, peaks, links, collective tables.
#include "core/error.h"
#include "core/hardware.h"
#include "core/yaml_reader.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    k3::parse_hardware(text, "fuzz.yaml");
  } catch (const k3::InputError&) {
  }
  return 0;
}
