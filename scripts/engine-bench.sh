#!/usr/bin/env bash
# The GPU engine at K3's real width on an H200 machine: `k3perf run` on the first 4 layers of Kimi K3
# (3 KDA layers with the dense layer 0 and two MoE layers of 896 MXFP4 experts, then 1 MLA layer;
# ~55 GB of random weights generated on the GPU), decode at several batches and contexts and a long
# prefill, each beside the roofline sim/ predicts for the same shapes on the H200 hardware file.
# Writes one JSON summary per run and a text log to $OUT (default bench/results/incoming).
# Usage: [K3PERF_GPU_BUNDLE=build/gpu-bundle] scripts/engine-bench.sh [quick | long]
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-programs.sh
k3perf="$bin/k3perf"
common=(--model kimi-k3 --weights random:7 --layers 4 --hardware h200-sxm)
status=0
run() {  # name, then k3perf run options
  local name="$1"
  shift
  echo "== $name: k3perf run ${common[*]} $*"
  "$k3perf" --data-dir scenarios run "${common[@]}" "$@" --json "$out/engine_$name.json" 2>&1 | grep -v "^decode step" || status=1
}
if [ "${1:-}" = long ]; then
  run decode_b1_ctx1048512 --batch 1 --prompt-tokens 256 --context 1048512 --decode-tokens 64
  run decode_b8_ctx1048512 --batch 8 --prompt-tokens 256 --context 1048512 --decode-tokens 64
  exit $status
fi
if [ "${1:-}" = quick ]; then
  run decode_b1_8k --batch 1 --prompt-tokens 512 --context 8192 --decode-tokens 32
  run prefill_8k --batch 1 --prompt-tokens 8192 --chunk-tokens 4096 --decode-tokens 2
  exit $status
fi
for batch in 1 8 64; do
  run "decode_b${batch}_8k" --batch "$batch" --prompt-tokens 256 --context 8192 --decode-tokens 64
done
# 1048512 + 64 decode tokens = 2^20, K3's max_position_embeddings.
for context in 131072 1048512; do
  run "decode_b1_ctx${context}" --batch 1 --prompt-tokens 256 --context "$context" --decode-tokens 64
  run "decode_b8_ctx${context}" --batch 8 --prompt-tokens 256 --context "$context" --decode-tokens 64
done
run decode_b8_8k_eager --batch 8 --prompt-tokens 256 --context 8192 --decode-tokens 32 --eager
for prompt in 8192 32768; do
  run "prefill_${prompt}" --batch 1 --prompt-tokens "$prompt" --chunk-tokens 8192 --decode-tokens 2
done
exit $status
