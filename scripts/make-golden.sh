#!/usr/bin/env bash
# Regenerates tests/data/k3_twin_golden: the K3 twin's per-layer activations for a fixed prompt,
# the golden data of the GPU engine's layer-by-layer test. The checkpoint itself is not committed:
# make-checkpoint is deterministic, so the same command rebuilds it byte for byte.
set -euo pipefail
cd "$(dirname "$0")/.."
k3perf="${K3PERF:-build/release/cli/k3perf}"
out=tests/data/k3_twin_golden
ckpt="${TMPDIR:-/tmp}/k3_twin_golden_checkpoint"
"$k3perf" make-checkpoint --config scenarios/models/k3-twin.json --seed 2026 --out "$ckpt"
"$k3perf" generate --weights "$ckpt" --prompt "$(cat $out/prompt.txt)" --max-new-tokens 8 --dump "$out"
rm -rf "$ckpt"
