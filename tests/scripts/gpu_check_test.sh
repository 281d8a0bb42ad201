#!/usr/bin/env bash
# scripts/gpu-check.sh's time limits, on stub programs (no GPU needed): with nothing hanging the run passes and
# writes every output; with a bench driver that hangs, that driver is killed at its limit and reported, the drivers
# after it still run, and the run fails.
set -euo pipefail
source "$(dirname "$0")/gpu_stubs.sh"
stub "$work/path" nvidia-smi 'echo "name, driver_version"; echo "stub GPU, 0"'
stub "$work/bundle/bin" device_probe 'echo "{}"'
stub "$work/bundle/bin" gpu_tests 'echo "[  PASSED  ] 1 test."'
stub "$work/bundle/bin" a_bench 'echo "{\"a\": 1}"'
stub "$work/bundle/bin" c_bench 'echo "{\"c\": 3}"'
check() {  # check NAME B_BENCH_BODY: runs gpu-check.sh on the stubs with a 2 s bench limit; its exit code in $code
  stub "$work/bundle/bin" b_bench "$2"
  rm -rf "$work/out"
  set +e
  PATH="$work/path:$PATH" OUT="$work/out" K3PERF_GPU_BUNDLE="$work/bundle" K3PERF_SANITIZERS=0 K3PERF_REFIT=0 \
    K3PERF_BENCH_TIMEOUT_S=2 "$root/scripts/gpu-check.sh" > "$work/$1.txt" 2>&1
  code=$?
  set -e
  grep -q '"a": 1' "$work/out/a_bench.json" || fail "$1: a_bench's output is missing" "$work/$1.txt"
  grep -q '"c": 3' "$work/out/c_bench.json" || fail "$1: c_bench did not run" "$work/$1.txt"
  grep -q "PASSED" "$work/out/gpu_tests.txt" || fail "$1: gpu_tests' output is missing" "$work/$1.txt"
}
check quick 'echo "{\"b\": 2}"'
[ "$code" -eq 0 ] || fail "with nothing hanging the run must pass (exit $code)" "$work/quick.txt"
grep -q "timed out" "$work/quick.txt" && fail "a timeout reported where nothing hung" "$work/quick.txt"
check hang 'sleep 60; echo "{\"b\": 2}"'
[ "$code" -ne 0 ] || fail "a step past its limit must fail the run" "$work/hang.txt"
grep -q "timed out after 2 s: .*b_bench" "$work/hang.txt" || fail "no timeout report for b_bench" "$work/hang.txt"
grep -q '"b": 2' "$work/out/b_bench.json" && fail "b_bench was not killed" "$work/hang.txt"
# K3PERF_BENCHES picks drivers by name: the hanging b_bench left out, the run passes and c_bench is not run.
rm -rf "$work/out"
PATH="$work/path:$PATH" OUT="$work/out" K3PERF_GPU_BUNDLE="$work/bundle" K3PERF_SANITIZERS=0 K3PERF_REFIT=0 \
  K3PERF_BENCH_TIMEOUT_S=2 K3PERF_BENCHES="a_bench" "$root/scripts/gpu-check.sh" > "$work/pick.txt" 2>&1 ||
  fail "K3PERF_BENCHES=a_bench must pass" "$work/pick.txt"
[ -e "$work/out/a_bench.json" ] || fail "K3PERF_BENCHES=a_bench did not run a_bench" "$work/pick.txt"
[ -e "$work/out/b_bench.json" ] && fail "K3PERF_BENCHES=a_bench ran b_bench" "$work/pick.txt"
[ -e "$work/out/c_bench.json" ] && fail "K3PERF_BENCHES=a_bench ran c_bench" "$work/pick.txt"
echo "ok: gpu-check.sh passes when nothing hangs; a hanging step is killed at its limit, reported, and fails the run"
