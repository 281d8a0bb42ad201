// A synthetic session workload (`k3perf cache --workload`, sim/workload/synthetic) through its reader, and the
// requests it generates where the reader's estimate of their memory is small.
#include "core/yaml_reader.h"
#include "fuzz_target.h"
#include "sim/workload/synthetic.h"

K3PERF_FUZZ_TEXT_TARGET(cache_yaml) {
  const k3::workload::SessionWorkloadSpec spec =
      k3::workload::parse_session_workload(k3::YamlNode::load_string(text, "fuzz.yaml"));
  if (k3::workload::session_workload_bytes(spec) <= (64u << 20)) k3::workload::generate_sessions(spec, 1);
}
