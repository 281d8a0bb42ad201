#!/usr/bin/env bash
# The whole GPU cycle on an H200 machine: build (or take a bundle from scripts/gpu-bundle.sh), probe
# the device, run every kernel test against the CPU reference, run them under compute-sanitizer
# (memcheck, racecheck) where it works (K3PERF_SANITIZERS=0 skips them), and benchmark the kernels
# against the roofline. Results go
# to $OUT (default bench/results/incoming) as JSON and text; commit the ones you rely on to
# bench/results/<date>-<gpu>-<what>/ with date, GPU, commit and command.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-programs.sh
status=0
git rev-parse --short HEAD > "$out/commit.txt" 2>/dev/null || echo "unknown" > "$out/commit.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$out/nvidia-smi.csv" || status=1
"$bin/device_probe" > "$out/device_probe.json" || status=1
echo "== kernel tests"
"$bin/gpu_tests" --gtest_output="json:$out/gpu_tests.json" > "$out/gpu_tests.txt" 2>&1 || status=1
tail -n 3 "$out/gpu_tests.txt"
if [ "${K3PERF_SANITIZERS:-1}" = 1 ] && command -v compute-sanitizer >/dev/null 2>&1; then
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer $tool"
    compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/gpu_tests" --gtest_brief=1 > "$out/sanitizer_$tool.txt" 2>&1
    echo "exit $?" >> "$out/sanitizer_$tool.txt"
    tail -n 2 "$out/sanitizer_$tool.txt"
  done
fi
for bench in "$bin"/*_bench; do
  name="$(basename "$bench")"
  echo "== $name"
  "$bench" --hardware scenarios/hardware/h200-sxm.yaml > "$out/$name.json" || status=1
  cat "$out/$name.json"
done
exit $status
