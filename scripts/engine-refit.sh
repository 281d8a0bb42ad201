#!/usr/bin/env bash
# The calibration that follows the engine (docs/fidelity.md): the fixed run matrix traced on an H200 machine, and
# h200-validated.yaml refitted from it with fixed training and held-out runs.
#   trace  (H200 machine) K3's first 4 layers (scripts/engine-traces.sh): decode at batch 1/8/64 x 8K/128K/1M (not
#          batch 64 at 1M) and prefills of 8K, 16K and 32K in one chunk; one K3 TP16/EP16 rank, all 93 layers
#          (scripts/engine-rank.sh traces, RANK default 15): decode at batch 1 and 8, 128K, and an 8K prefill.
#          Traces, predictions and compares to $OUT.
#   fit    (any machine) `k3perf calibrate` of those files (DIR, default $OUT) on h200-sxm: trained on decode b1 8K,
#          b64 8K, b1 1M, the 8K and 32K prefills and the rank's b1 decode; held out: the other decode runs, the 16K
#          prefill and the rank's b8 decode. Writes $OUT/h200-validated.yaml and the fit's report
#          ($OUT/calibrate.txt, .json, and its tables in $OUT/fidelity.md); prints the held-out errors. Predictions
#          are made again here with this checkout's simulator (`k3perf run --dry-run`), all on h200-sxm (the fit's
#          base, so that a refit does not depend on the file it replaces), so a model change refits without a GPU.
#   report (any machine) the same fit of DIR with the predictions committed there (DIR/predictions, or the folder
#          K3PERF_PREDICTIONS names: a refit of a model change keeps the traces where they were measured), its tables
#          written into docs/fidelity.md between its markers (the "Against the engine" section).
# Usage: [K3PERF_GPU_BUNDLE=build/gpu-bundle] scripts/engine-refit.sh trace
#        [K3PERF=build/release/cli/k3perf] scripts/engine-refit.sh fit [DIR]
#        [K3PERF=build/release/cli/k3perf] [K3PERF_PREDICTIONS=DIR2/predictions] scripts/engine-refit.sh report DIR
set -uo pipefail
cd "$(dirname "$0")/.."
decode=(decode_b1_ctx8192 decode_b8_ctx8192 decode_b64_ctx8192 decode_b1_ctx131072 decode_b8_ctx131072
        decode_b64_ctx131072 decode_b1_ctx1048512 decode_b8_ctx1048512)
prefill=(prefill_8192 prefill_16384 prefill_32768)
r="${RANK:-15}"
# The rank's runs in the fit (its 8K prefill is traced too, but its 2.7 MB trace is not kept in the tree).
rank_runs=("k3_tp16_rank${r}_decode_b1_ctx131072_traced" "k3_tp16_rank${r}_decode_b8_ctx131072_traced")
train=(decode_b1_ctx8192 decode_b64_ctx8192 decode_b1_ctx1048512 prefill_8192 prefill_32768 "${rank_runs[0]}")
what="${1:-}"
case "$what" in
  trace)
    status=0
    scripts/engine-traces.sh "${decode[@]}" "${prefill[@]}" || status=1
    RANK="$r" scripts/engine-rank.sh traces || status=1
    exit $status
    ;;
  fit | report)
    dir="${2:-${OUT:-bench/results/incoming}}"
    out="${OUT:-$dir}"
    k3perf="${K3PERF:-build/release/cli/k3perf}"
    [ -x "$k3perf" ] || { echo "engine-refit: no k3perf at $k3perf (set K3PERF)" >&2; exit 2; }
    k3perf="$(cd "$(dirname "$k3perf")" && pwd)/$(basename "$k3perf")"
    preds="$out/predictions"  # this checkout's predictions of the same runs (report: those committed in DIR)
    [ "$what" = report ] && preds="${K3PERF_PREDICTIONS:-$dir/predictions}"
    if [ "$what" = fit ]; then
      mkdir -p "$preds"
      K3PERF_BIN="$(dirname "$k3perf")" K3PERF_PREDICT_ONLY=1 OUT="$preds" scripts/engine-traces.sh "${decode[@]}" \
        "${prefill[@]}" || exit 1
      K3PERF_BIN="$(dirname "$k3perf")" K3PERF_PREDICT_ONLY=1 OUT="$preds" RANK="$r" K3PERF_HARDWARE=h200-sxm \
        scripts/engine-rank.sh traces || exit 1
      gzip -9f "$preds"/*.json  # a 93-layer rank's prediction is 1.5 MB of JSON, a slice's 55 KB
    fi
    args=()
    for name in "${decode[@]}" "${prefill[@]}" "${rank_runs[@]}"; do
      trace="$dir/trace_$name.json.gz"
      [ -f "$trace" ] || { echo "engine-refit: $trace is missing" >&2; exit 2; }
      pred=""
      for candidate in "$preds/pred_$name.json" "$preds/pred_$name.json.gz" "$preds/prediction_$name.json.gz"; do
        [ -f "$candidate" ] && { pred="$candidate"; break; }
      done
      [ -n "$pred" ] || { echo "engine-refit: no prediction of $name in $preds" >&2; exit 2; }
      role=--held-out
      for t in "${train[@]}"; do [ "$t" = "$name" ] && role=--run; done
      args+=("$role" "$pred,$trace")
    done
    if [ "$what" = fit ]; then
      "$k3perf" --data-dir scenarios calibrate "${args[@]}" --base h200-sxm --out "$out/h200-validated.yaml" \
        --name "H200 SXM (validated on k3perf engine traces)" --source-id k3perf-h200-engine-calibration \
        --json "$out/calibrate.json" --markdown "$out/fidelity.md" | tee "$out/calibrate.txt"
      exit "${PIPESTATUS[0]}"
    fi
    # report: the tables between the markers of docs/fidelity.md, replaced atomically.
    tables="$(mktemp)"
    trap 'rm -f "$tables" docs/fidelity.md.tmp' EXIT
    "$k3perf" --data-dir scenarios calibrate "${args[@]}" --base h200-sxm --markdown "$tables" > /dev/null || exit 1
    begin='<!-- engine-fit tables: scripts/engine-refit.sh report -->' end='<!-- engine-fit tables end -->'
    grep -qF "$begin" docs/fidelity.md && grep -qF "$end" docs/fidelity.md ||
      { echo "engine-refit: docs/fidelity.md lacks the markers '$begin' and '$end'" >&2; exit 2; }
    awk -v begin="$begin" -v end="$end" -v tables="$tables" '
      $0 == begin { print; while ((getline line < tables) > 0) print line; skip = 1; next }
      $0 == end { skip = 0 }
      !skip { print }' docs/fidelity.md > docs/fidelity.md.tmp && mv docs/fidelity.md.tmp docs/fidelity.md
    echo "engine-refit: docs/fidelity.md tables regenerated from $dir"
    ;;
  *)
    echo "usage: scripts/engine-refit.sh trace | fit [DIR] | report [DIR]" >&2
    exit 2
    ;;
esac
