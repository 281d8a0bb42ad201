#!/usr/bin/env bash
# One rank of a real deployment on an H200 machine (docs/engine.md#parallel-layouts-and-rank-emulation):
#   rank   K3, rank $RANK (default 15) of 16xH200 at TP16/EP16, all 93 layers (its shards of random weights, ~101 GiB), decode
#          at batch 1/8/64 and context 8K/128K/1M where the memory plan allows (it refuses the others), CUDA
#          graphs; prefill of 8K and 32K; and that rank of the 8-GPU TP8/EP8 layout (refused: it does not fit).
#          Rank 15, the last of its group, routes the most tokens at T < tp (ceil(T/16)): the slowest rank, which sets
#          a synchronous deployment's step; rank 0 routes none at batch 1 and 8 (bench/results/2026-12-02-h200-rank);
#   traces the TP16 rank traced (CUPTI) beside its prediction, then `k3perf compare`: decode at batch 1 and 8 at
#          128K (8 steps) and one 8K-token prefill; compute and the emulated collectives apart;
#   claims Kimi Linear 48B and its all-MLA counterfactual (overrides.attention: all_mla): decode at batch 1 at
#          128K/512K/1M (CLAIMS P5) and prefill of 32K and 128K;
#   claims-long  the same pair's prefill of $LONG_PROMPTS (default 512K; P6), warmed up on one chunk only
#          (1M all-MLA is ~25 min of a GPU, more than one call).
# Each run beside `k3perf predict` of the same scenario on $K3PERF_HARDWARE (default h200-validated); one JSON summary
# per run and a log.
# Usage: [K3PERF_GPU_BUNDLE=build/gpu-bundle] scripts/engine-rank.sh [rank | traces | claims | claims-long | all]
#   traces with K3PERF_PREDICT_ONLY=1 (and K3PERF_BIN): only the traced runs' predictions, by this checkout (no GPU)
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-programs.sh
k3perf="$bin/k3perf"
status=0
r="${RANK:-15}"
run() {  # name, then k3perf run arguments
  local name="$1"
  shift
  echo "== $name: k3perf run $*"
  "$k3perf" --data-dir scenarios run "$@" --json "$out/engine_$name.json" 2>&1 | grep -v "^decode step" || status=1
}
hw="${K3PERF_HARDWARE:-h200-validated}"
rank=(--model kimi-k3 --weights random:7 --hardware "$hw" --set gpus=16 --set parallelism.tp=16
      --set parallelism.ep=16 --rank "$r")
prefill=(--set phase=prefill --set workload.context_tokens=0 --decode-tokens 2)
what="${1:-all}"
if [ "$what" = rank ] || [ "$what" = all ]; then
  for batch in 1 8 64; do
    for context in 8192 131072 1048512; do  # 1048512 + 64 decode tokens = 2^20
      run "k3_tp16_rank${r}_decode_b${batch}_ctx${context}" "${rank[@]}" --batch "$batch" --prompt-tokens 256 \
        --context "$context" --decode-tokens 64
    done
  done
  for prompt in 8192 32768; do
    run "k3_tp16_rank${r}_prefill_${prompt}" "${rank[@]}" "${prefill[@]}" --set workload.new_tokens="$prompt" \
      --prompt-tokens "$prompt" --chunk-tokens 8192
  done
  run "k3_tp8_rank$((r % 8))_decode_b1_ctx131072" --model kimi-k3 --weights random:7 --hardware "$hw" --set gpus=8 \
    --set parallelism.tp=8 --set parallelism.ep=8 --rank "$((r % 8))" --batch 1 --context 131072 --decode-tokens 16
fi
if [ "$what" = traces ] || [ "$what" = all ]; then
  traced() {  # name, then k3perf run arguments: a trace and its prediction, compared
    local name="$1"
    shift
    if [ -n "${K3PERF_PREDICT_ONLY:-}" ]; then  # the prediction alone, by this checkout's simulator (no GPU)
      "$k3perf" --data-dir scenarios run "$@" --dry-run --prediction-json "$out/prediction_$name.json" >/dev/null ||
        status=1
      return
    fi
    run "$name" "$@" --trace "$out/trace_$name.json.gz" --prediction-json "$out/prediction_$name.json"
    "$k3perf" --data-dir scenarios compare --prediction "$out/prediction_$name.json" --trace "$out/trace_$name.json.gz" \
      --hardware "$hw" --json "$out/compare_$name.json" --top 15 >"$out/compare_$name.txt" 2>&1 || status=1
    head -8 "$out/compare_$name.txt"
  }
  for batch in 1 8; do
    traced "k3_tp16_rank${r}_decode_b${batch}_ctx131072_traced" "${rank[@]}" --batch "$batch" --prompt-tokens 256 \
      --context 131072 --decode-tokens 8
  done
  traced k3_tp16_rank${r}_prefill_8192_traced "${rank[@]}" "${prefill[@]}" --set workload.new_tokens=8192 \
    --prompt-tokens 8192 --chunk-tokens 8192 --trace-phase prefill
fi
if [ "$what" = claims ] || [ "$what" = all ]; then
  for attention in as_published all_mla; do
    kl=(--model kimi-linear-48b-a3b --weights random:7 --hardware "$hw" --eager
        --set overrides.attention="$attention")
    for context in 131072 524288 1048512; do
      run "kl_${attention}_decode_b1_ctx${context}" "${kl[@]}" --batch 1 --prompt-tokens 256 --context "$context" \
        --decode-tokens 32
    done
    for prompt in 32768 131072; do
      run "kl_${attention}_prefill_${prompt}" "${kl[@]}" "${prefill[@]}" --set workload.new_tokens="$prompt" \
        --prompt-tokens "$prompt" --chunk-tokens 8192
    done
  done
fi
if [ "$what" = claims-long ]; then  # LONG_PROMPTS (default 524288): prefill lengths; the warm-up is one chunk
  for prompt in ${LONG_PROMPTS:-524288}; do
    for attention in as_published all_mla; do
      run "kl_${attention}_prefill_${prompt}" --model kimi-linear-48b-a3b --weights random:7 \
        --hardware "$hw" --eager --set overrides.attention="$attention" "${prefill[@]}" \
        --set workload.new_tokens="$prompt" --prompt-tokens "$prompt" --chunk-tokens 8192 --warmup-tokens 8192
    done
  done
fi
exit $status
