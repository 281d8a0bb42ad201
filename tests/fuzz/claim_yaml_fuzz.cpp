// A published claim (scenarios/claims/*.yaml) through its loader (sim/claims/claim), which reads a path.
#include "fuzz_target.h"
#include "sim/claims/claim.h"

K3PERF_FUZZ_TARGET(claim_yaml) { k3::load_claim(k3::fuzz::write_scratch("claim.yaml", data)); }
