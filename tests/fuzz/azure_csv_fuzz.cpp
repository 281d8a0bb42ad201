// An Azure LLM inference trace, CSV (sim/workload/azure_reader).
#include "fuzz_target.h"
#include "sim/workload/azure_reader.h"

K3PERF_FUZZ_TEXT_TARGET(azure_csv) { k3::workload::parse_azure_trace(text, "fuzz.csv"); }
