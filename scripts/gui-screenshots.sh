#!/usr/bin/env bash
# Regenerates docs/figures/gui/: every view of the GUI rendered offscreen by `k3perf-gui --screenshot`, on the
# embedded default scenario, on a committed H200 trace with its prediction, with a pinned baseline, and with an
# edit the library refuses.   scripts/gui-screenshots.sh [build-dir]   (default build/release)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
gui="${1:-$root/build/release}/gui/app/k3perf-gui"
[ -x "$gui" ] || { echo "gui-screenshots: $gui not built (needs Qt 6: scripts/setup-deps.sh)" >&2; exit 1; }
out="$root/docs/figures/gui"
run="$root/bench/results/2026-12-01-h200-engine-traces-9"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export QT_QPA_PLATFORM=offscreen
"$gui" --screenshot "$tmp/default" > /dev/null
"$gui" --screenshot "$tmp/h200" "$run/pred_decode_b1_ctx131072.json" "$run/trace_decode_b1_ctx131072.json.gz" > /dev/null
"$gui" --baseline --set workload.batch=32 --set precision.kv_cache=fp8 --screenshot "$tmp/baseline" > /dev/null
"$gui" --set parallelism.tp=7 --screenshot "$tmp/error" > /dev/null 2>&1
mkdir -p "$out"
for v in breakdown roofline serving whatif window profile; do cp "$tmp/default/$v.png" "$out/default-$v.png"; done
for v in breakdown roofline timeline compare window; do cp "$tmp/h200/$v.png" "$out/h200-$v.png"; done
cp "$tmp/baseline/whatif.png" "$out/baseline-whatif.png"
cp "$tmp/error/whatif.png" "$out/error-whatif.png"
echo "gui-screenshots: wrote $(ls "$out" | wc -l) PNGs to docs/figures/gui/"
