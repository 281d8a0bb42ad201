// A serving scenario through its loader (sim/serving/serving_config), its cache section (trace_workload) and its
// plan section (sim/plan) when it has one. Request traces it names are not read (the trace targets read those).
#include "fuzz_data.h"
#include "fuzz_target.h"
#include "sim/plan/plan.h"
#include "sim/serving/serving_config.h"
#include "sim/serving/trace_workload.h"

K3PERF_FUZZ_TEXT_TARGET(serving_yaml) {
  const k3::serving::ServingScenario s = k3::serving::parse_serving_scenario(text, "fuzz.yaml", k3::fuzz::data());
  k3::serving::read_serving_cache(s);
  if (s.plan) k3::plan::read_plan_space(*s.plan, s);
}
