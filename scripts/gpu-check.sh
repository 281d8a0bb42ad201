#!/usr/bin/env bash
# The whole GPU cycle on an H200 machine: build (or take a bundle from scripts/gpu-bundle.sh), probe
# the device, run every kernel test against the CPU reference, run them under compute-sanitizer
# (memcheck, racecheck, initcheck, synccheck; one run per suite and tool, scripts/gpu-sanitize.sh;
# K3PERF_SANITIZERS=0 skips them), and benchmark the kernels
# against the roofline, then re-trace the engine's fixed run matrix and refit h200-validated.yaml from it
# (scripts/engine-refit.sh; K3PERF_REFIT=0 skips it), reporting the held-out errors. Results go
# to $OUT (default bench/results/incoming) as JSON and text; commit the ones you rely on to
# bench/results/<date>-<gpu>-<what>/ with date, GPU, commit and command.
# Each step runs under a time limit, so that a kernel that hangs costs one step, not the machine's time:
# K3PERF_TEST_TIMEOUT_S (the kernel tests, default 900), K3PERF_SANITIZER_TIMEOUT_S (each sanitizer run,
# default 300), K3PERF_BENCH_TIMEOUT_S (each bench driver, default 900). K3PERF_BENCHES="a_bench b_bench" runs
# only those drivers (default: every bench driver of the bundle). A step that runs past its
# limit is killed, reported as "timed out after N s" on the console (and in its .txt output), and fails the run.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-programs.sh
status=0
# limited SECONDS OUTPUT_FILE COMMAND...: runs COMMAND with its standard output to OUTPUT_FILE (and its standard
# error too where OUTPUT_FILE ends in .txt; else on the console, so that JSON stays JSON), killed after SECONDS;
# returns COMMAND's exit status (124 when it timed out, said on the console and, for a .txt, in the file).
limited() {
  local seconds="$1" file="$2"
  shift 2
  if [[ "$file" == *.txt ]]; then
    timeout --kill-after=30 "$seconds" "$@" > "$file" 2>&1
  else
    timeout --kill-after=30 "$seconds" "$@" > "$file"
  fi
  local code=$?
  if [ "$code" = 124 ] || [ "$code" = 137 ]; then
    echo "timed out after $seconds s: $*"
    if [[ "$file" == *.txt ]]; then echo "timed out after $seconds s" >> "$file"; fi
    code=124
  fi
  return "$code"
}
git rev-parse --short HEAD > "$out/commit.txt" 2>/dev/null || echo "unknown" > "$out/commit.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$out/nvidia-smi.csv" || status=1
limited 120 "$out/device_probe.json" "$bin/device_probe" || status=1
echo "== kernel tests"
limited "${K3PERF_TEST_TIMEOUT_S:-900}" "$out/gpu_tests.txt" \
  "$bin/gpu_tests" --gtest_output="json:$out/gpu_tests.json" || status=1
tail -n 3 "$out/gpu_tests.txt"
if [ "${K3PERF_SANITIZERS:-1}" = 1 ] && command -v compute-sanitizer >/dev/null 2>&1; then
  echo "== compute-sanitizer, per suite and tool (scripts/gpu-sanitize.sh)"
  OUT="$out" scripts/gpu-sanitize.sh | tail -n 12 || status=1
fi
for lab in "$bin"/lab_*; do  # bench/lab's experiments: each checks its GPU result against its CPU function
  [ -x "$lab" ] || continue
  name="$(basename "$lab")"
  echo "== $name"
  limited "${K3PERF_BENCH_TIMEOUT_S:-900}" "$out/$name.txt" "$lab"
  code=$?
  if [ "$code" = 77 ]; then echo "skipped: the device cannot run it"; elif [ "$code" != 0 ]; then status=1; fi
  tail -n 2 "$out/$name.txt"
done
for bench in "$bin"/*_bench; do
  name="$(basename "$bench")"
  if [ -n "${K3PERF_BENCHES:-}" ] && [[ " $K3PERF_BENCHES " != *" $name "* ]]; then continue; fi
  echo "== $name"
  limited "${K3PERF_BENCH_TIMEOUT_S:-900}" "$out/$name.json" "$bench" --hardware scenarios/hardware/h200-sxm.yaml ||
    status=1
  cat "$out/$name.json"
done
if [ "${K3PERF_REFIT:-1}" = 1 ]; then  # the calibration follows the engine: re-trace the fixed matrix and refit
  echo "== refit (scripts/engine-refit.sh): traces, then h200-validated.yaml refitted with held-out errors"
  mkdir -p "$out/refit"
  OUT="$out/refit" scripts/engine-refit.sh trace > "$out/refit/trace.log" 2>&1 || status=1
  OUT="$out/refit" K3PERF="$bin/k3perf" scripts/engine-refit.sh fit "$out/refit" > "$out/refit/fit.log" 2>&1 ||
    status=1
  grep -E -i "held out|median" "$out/refit/fit.log" | head -n 20
fi
exit $status
