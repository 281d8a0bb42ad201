#!/usr/bin/env bash
# A live engine run traced every way k3perf writes a trace, on an H200 machine, each file checked by
# scripts/check-trace.py (nothing Perfetto would drop, flows, steps holding the same ops, kineto's fields):
#   run       `k3perf run --trace` (in-process CUPTI), k3perf format
#   run-kineto    the same, `--trace-format kineto`
#   profile   `k3perf profile -- k3perf run` (the CUPTI injection; steps from the engine's NVTX "step N" ranges)
#   profile-kineto    the same, `--trace-format kineto`
# The run: K3's first 4 layers at real width, batch 8, 8 K context, $STEPS decode steps (default 24), CUDA graphs.
# Writes $OUT/trace_<form>.json.gz, its run's output trace_<form>.txt and the check's check_<form>.txt and .json;
# exits 1 when a run or a check fails. Usage: [K3PERF_GPU_BUNDLE=DIR] [OUT=DIR] [STEPS=N] scripts/trace-check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-programs.sh
steps="${STEPS:-24}"
run=("$bin/k3perf" --data-dir scenarios run --model kimi-k3 --weights random:7 --layers 4 --batch 8
     --prompt-tokens 256 --context 8192 --decode-tokens "$steps")
status=0
check() {  # form, then the command that writes $out/trace_<form>.json.gz
  local form="$1" trace="$out/trace_$1.json.gz"
  shift
  echo "== $form: $*"
  "$@" > "$out/trace_$form.txt" 2>&1 || { echo "$form: the run failed (trace_$form.txt)"; status=1; return; }
  python3 scripts/check-trace.py "$trace" --steps "$steps" --json "$out/check_$form.json" > "$out/check_$form.txt" 2>&1 ||
    status=1
  cat "$out/check_$form.txt"
}
check run "${run[@]}" --trace "$out/trace_run.json.gz"
check run-kineto "${run[@]}" --trace "$out/trace_run-kineto.json.gz" --trace-format kineto
check profile "$bin/k3perf" profile -o "$out/trace_profile.json.gz" -- "${run[@]}"
check profile-kineto "$bin/k3perf" profile --trace-format kineto -o "$out/trace_profile-kineto.json.gz" -- "${run[@]}"
echo "trace-check: $([ "$status" -eq 0 ] && echo "every trace passed" || echo "a run or a check failed") ($out)"
exit "$status"
