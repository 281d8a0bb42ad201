#!/usr/bin/env bash
# CUPTI traces of the GPU engine at K3's real width on an H200 machine (docs/profile.md): K3's first 4
# layers with random weights, decode at several batches and contexts, each traced (`k3perf run --trace`,
# with the simulator's prediction beside it) and untraced (the tracing overhead), then `k3perf compare`.
# Writes trace_<name>.json.gz, pred_<name>.json, run_traced_<name>.json, run_untraced_<name>.json and
# compare_<name>.json to $OUT (default bench/results/incoming).
# Usage: [K3PERF_GPU_BUNDLE=build/gpu-bundle] scripts/engine-traces.sh [name ...]
#   K3PERF_PREDICT_ONLY=1 (with K3PERF_BIN): only pred_<name>.json, as this checkout's simulator predicts the run
#   names: decode_b<B>_ctx<C> for the decode matrix below, prefill_<P> for a traced prefill of P tokens
#   in one chunk (needs --trace-phase prefill); no name: the whole matrix.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-programs.sh
k3perf="$bin/k3perf"
common=(--model kimi-k3 --weights random:7 --layers 4 --hardware h200-sxm)
status=0
trace_one() {  # name, then k3perf run options
  local name="$1"
  shift
  if [ -n "${K3PERF_PREDICT_ONLY:-}" ]; then  # the prediction alone, by this checkout's simulator (no GPU)
    "$k3perf" --data-dir scenarios run "${common[@]}" "$@" --dry-run --prediction-json "$out/pred_$name.json" \
      >/dev/null || status=1
    return
  fi
  echo "== $name: k3perf run ${common[*]} $*"
  "$k3perf" --data-dir scenarios run "${common[@]}" "$@" --trace "$out/trace_$name.json.gz" \
    --prediction-json "$out/pred_$name.json" --json "$out/run_traced_$name.json" 2>&1 | grep -v "^decode step" || status=1
  "$k3perf" --data-dir scenarios run "${common[@]}" "$@" --json "$out/run_untraced_$name.json" 2>&1 |
    grep -E "median|error" || status=1
  "$k3perf" compare --prediction "$out/pred_$name.json" --trace "$out/trace_$name.json.gz" \
    --json "$out/compare_$name.json" 2>&1 | grep -E -i "coverage|median|step" | head -n 8 || status=1
}
run_named() {
  local name="$1" batch context prompt
  if [[ "$name" =~ ^decode_b([0-9]+)_ctx([0-9]+)$ ]]; then
    batch="${BASH_REMATCH[1]}"
    context="${BASH_REMATCH[2]}"
    trace_one "$name" --batch "$batch" --prompt-tokens 256 --context "$context" --decode-tokens 24
  elif [[ "$name" =~ ^prefill_([0-9]+)$ ]]; then
    prompt="${BASH_REMATCH[1]}"
    trace_one "$name" --batch 1 --prompt-tokens "$prompt" --chunk-tokens "$prompt" --decode-tokens 2 \
      --trace-phase prefill
  else
    echo "engine-traces: unknown run name '$name' (decode_b<B>_ctx<C> or prefill_<P>)" >&2
    status=1
  fi
}
if [ $# -gt 0 ]; then
  for name in "$@"; do run_named "$name"; done
  exit $status
fi
# 1048512 + 24 decode tokens stays below 2^20, K3's max_position_embeddings.
for name in decode_b1_ctx8192 decode_b8_ctx8192 decode_b64_ctx8192 decode_b1_ctx131072 decode_b8_ctx131072 \
  decode_b64_ctx131072 decode_b1_ctx1048512 decode_b8_ctx1048512 prefill_32768; do
  run_named "$name"
done
exit $status
