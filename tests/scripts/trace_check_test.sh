#!/usr/bin/env bash
# scripts/trace-check.sh on a stub k3perf (no GPU needed): each of the four forms runs the engine the way it says
# (run --trace, its kineto form, profile -- run, its kineto form) and its file is checked; a trace that fails a check
# and a run that fails are reported and fail the whole.
set -euo pipefail
source "$(dirname "$0")/gpu_stubs.sh"
old="$root/bench/results/2026-12-03-h200-moe-wgmma/trace_decode_b1_ctx8192.json.gz"  # fails 4 checks, 24 steps
# The stub copies that trace to the path `--trace P` or `profile -o P` names and logs its arguments; a run with
# --trace-format kineto under profile fails.
stub "$work/bundle/bin" k3perf '
echo "$*" >> "'"$work"'/calls.txt"
[[ "$*" == *"profile --trace-format kineto"* ]] && { echo "no CUDA"; exit 1; }
while [ $# -gt 0 ]; do
  case "$1" in --trace | -o) cp "'"$old"'" "$2"; shift ;; esac
  shift
done'
set +e
env OUT="$work/out" K3PERF_GPU_BUNDLE="$work/bundle" "$root/scripts/trace-check.sh" > "$work/all.txt" 2>&1
code=$?
set -e
[ "$code" -eq 1 ] || fail "failed checks and a failed run must fail the whole (exit $code)" "$work/all.txt"
[ "$(wc -l < "$work/calls.txt")" -eq 4 ] || fail "four runs" "$work/calls.txt"
grep -q -- "run --model kimi-k3 .*--decode-tokens 24 --trace $work/out/trace_run.json.gz$" "$work/calls.txt" ||
  fail "the in-process run" "$work/calls.txt"
grep -q -- "--trace-format kineto$" "$work/calls.txt" || fail "the kineto run" "$work/calls.txt"
grep -q -- "^profile -o $work/out/trace_profile.json.gz -- $work/bundle/bin/k3perf --data-dir scenarios run " \
  "$work/calls.txt" || fail "profile of a run" "$work/calls.txt"
for form in run run-kineto profile; do
  grep -q "^FAIL op_spans_per_step" "$work/out/check_$form.txt" || fail "$form's trace is checked" "$work/all.txt"
  grep -q "^ok   steps: 24 step spans" "$work/out/check_$form.txt" || fail "$form: 24 steps" "$work/all.txt"
done
grep -q "profile-kineto: the run failed" "$work/all.txt" || fail "the failed run is named" "$work/all.txt"
[ ! -e "$work/out/check_profile-kineto.txt" ] || fail "a failed run's missing trace is not checked" "$work/all.txt"
grep -q "trace-check: a run or a check failed" "$work/all.txt" || fail "the verdict" "$work/all.txt"
echo "ok: trace-check.sh runs the four forms, checks each trace and fails on a failed check or run"
