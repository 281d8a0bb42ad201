// A hardware file through YamlNode and its reader (core/hardware): sources, peaks, links, collective tables.
#include "core/hardware.h"
#include "fuzz_target.h"

K3PERF_FUZZ_TEXT_TARGET(hardware_yaml) { k3::parse_hardware(text, "fuzz.yaml"); }
