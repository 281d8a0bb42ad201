// A Mooncake request trace, one JSON object a line (sim/workload/mooncake_reader).
#include "fuzz_target.h"
#include "sim/workload/mooncake_reader.h"

K3PERF_FUZZ_TEXT_TARGET(mooncake_jsonl) { k3::workload::parse_mooncake_trace(text, "fuzz.jsonl"); }
