#!/usr/bin/env bash
# Writes tests/data/kimi_linear_oracle_wide/: a tiny random Kimi Linear model at the GPU kernels' per-head
# widths (scenarios/models/kimi-linear-twin-wide.json), built and run by transformers' own kimi_linear
# implementation (scripts/oracle_kimi_linear.py: fp32 on the CPU), with its prompt and decode logits. The
# GPU test EngineKimiLinearOracle (tests/engine/runtime/engine_kimi_linear_gpu_test.cpp) loads it into the GPU runtime
# and compares the logits. Needs python3 with torch, transformers (with KimiLinear) and safetensors.
#   scripts/make-oracle-wide.sh [out_dir]
# The twin config is flat (the published Kimi Linear form, no nested text_config), which is what the oracle
# script reads; --prompt-tokens 40 gives prefill chunks of 16, 16 and 8 in the GPU test, and every prompt row
# plus 4 greedy decode steps are compared.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-tests/data/kimi_linear_oracle_wide}"
python3 scripts/oracle_kimi_linear.py --config scenarios/models/kimi-linear-twin-wide.json --out "$out" \
  --seed 1234 --prompt-tokens 40 --decode-steps 4
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
with open(os.path.join(out, "expected_logits.json")) as f:
    e = json.load(f)
text = f"""# Kimi Linear oracle at the GPU kernels' widths (transformers)

Written by `scripts/make-oracle-wide.sh` (CPU, fp32) with transformers {e['transformers_version']} and torch
{e['torch_version']}:

    python3 scripts/oracle_kimi_linear.py --config scenarios/models/kimi-linear-twin-wide.json \\
        --out tests/data/kimi_linear_oracle_wide --seed {e['seed']} --prompt-tokens {len(e['prompt'])} \\
        --decode-steps {len(e['decode_tokens'])}

- `config.json`: the wide twin's published-form Kimi Linear config (what k3perf reads);
- `model.safetensors`: the transformers model's random fp32 weights, tensor names as in the published
  Kimi Linear checkpoint;
- `expected_logits.json`: logits of the prompt (prefill) and of greedy decode steps with the transformers
  cache. `EngineKimiLinearOracle` (tests/engine/runtime/engine_kimi_linear_gpu_test.cpp) compares the GPU runtime's.
"""
tmp = os.path.join(out, "README.md.tmp")
with open(tmp, "w") as f:
    f.write(text)
os.replace(tmp, os.path.join(out, "README.md"))
PY
