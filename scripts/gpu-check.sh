#!/usr/bin/env bash
# Run on an H200 machine: builds the GPU probes for sm_90 (unless prebuilt ones are given in
# $K3PERF_GPU_BIN) and writes their JSON results to $OUT (default: bench/results/incoming).
# Results worth keeping are committed to bench/results/ with date, GPU, commit and command.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-bench/results/incoming}"
bin="${K3PERF_GPU_BIN:-build/gpu-probes}"
mkdir -p "$out" "$bin"
if [ ! -x "$bin/device_probe" ]; then
  nvcc -O2 -std=c++17 -arch=sm_90 -o "$bin/device_probe" bench/gpu/device_probe.cu  # same as the CMake target
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$out/nvidia-smi.csv"
"$bin/device_probe" > "$out/device_probe.json"
echo "gpu-check: wrote $out/device_probe.json and $out/nvidia-smi.csv"
cat "$out/device_probe.json"
