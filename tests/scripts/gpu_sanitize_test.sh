#!/usr/bin/env bash
# scripts/gpu-sanitize.sh on stub programs (no GPU needed): every suite of the listing runs under every tool, one
# run each; a finding, a failing test and a run past its limit are each reported in the summary and fail the run;
# a suite without GPU work and a skipped one do not; the suites named alone run too; K3PERF_SANITIZER_SUITES picks
# suites.
set -euo pipefail
source "$(dirname "$0")/gpu_stubs.sh"
# A listing in gtest's form: plain, value-parameterised and typed suites.
stub "$work/bundle/bin" gpu_tests '
if [ "$1" = --gtest_list_tests ]; then
  printf "GpuClean.\n  A\n  B\nInst/GpuRacy.\n  A/0  # GetParam() = 1\nGpuTyped/0.  # TypeParam = float\n  A\nGpuSlow.\n  A\nGpuFailing.\n  A\nEngineBig.\n  A\nGpuCpuOnly.\n  A\nRangeProfiler.\n  A\n"
  exit 0
fi
filter="${2#--gtest_filter=}"
case "$filter" in
  GpuSlow.*) sleep 30 ;;
  GpuFailing.*) echo "[==========] 1 test from 1 test suite ran."; echo "[  FAILED  ] 1 test"; exit 1 ;;
esac
echo "[==========] 2 tests from 1 test suite ran."'
# compute-sanitizer --tool T --error-exitcode 9 PROGRAM ARGS: racecheck finds a hazard in GpuRacy.
stub "$work/path" compute-sanitizer '
tool="$2"; shift 4
"$@"; code=$?
if [[ "$*" == *GpuCpuOnly* ]]; then echo "========= Error: Target application terminated before first instrumented API call"; exit 255; fi
[[ "$*" == *RangeProfiler* ]] && { echo "RangeProfiler must not run under the sanitizer"; exit 1; }
if [ "$tool" = racecheck ]; then
  if [[ "$*" == *GpuRacy* ]]; then echo "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"; exit 9; fi
  echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
else
  echo "========= ERROR SUMMARY: 0 errors"
fi
exit $code'
run() {  # run NAME [VAR=VALUE...]: gpu-sanitize.sh on the stubs with a 2 s limit; its exit code in $code
  local name="$1"
  shift
  rm -rf "$work/out"
  set +e
  env PATH="$work/path:$PATH" OUT="$work/out" K3PERF_GPU_BUNDLE="$work/bundle" K3PERF_SANITIZER_TIMEOUT_S=2 "$@" \
    "$root/scripts/gpu-sanitize.sh" > "$work/$name.txt" 2>&1
  code=$?
  set -e
}
row() {  # row TOOL SUITE: the summary line of that run, without its seconds
  awk -F'\t' -v t="$1" -v s="$2" '$1 == t && $2 == s { print $3 "\t" $4 "\t" $6 }' "$work/out/sanitizer/summary.tsv"
}
run all
[ "$code" -ne 0 ] || fail "findings, a failing test and a timeout must fail the run" "$work/all.txt"
summary="$work/out/sanitizer/summary.tsv"
[ "$(($(wc -l < "$summary") - 1))" -eq 32 ] || fail "8 suites x 4 tools must be 32 rows" "$summary"
[ "$(row memcheck GpuCpuOnly | cut -f3)" = "no GPU work" ] || fail "GpuCpuOnly: $(row memcheck GpuCpuOnly)" "$summary"
[ "$(row racecheck RangeProfiler)" = $'-\t-\tskipped' ] || fail "RangeProfiler: $(row racecheck RangeProfiler)" "$summary"
[ "$(row memcheck GpuClean)" = $'2\t0\tclean' ] || fail "GpuClean under memcheck: $(row memcheck GpuClean)" "$summary"
[ "$(row racecheck Inst/GpuRacy)" = $'2\t1\terrors' ] || fail "the race: $(row racecheck Inst/GpuRacy)" "$summary"
[ "$(row initcheck Inst/GpuRacy)" = $'2\t0\tclean' ] || fail "GpuRacy under initcheck" "$summary"
[ "$(row synccheck GpuTyped/0)" = $'2\t0\tclean' ] || fail "the typed suite: $(row synccheck GpuTyped/0)" "$summary"
[ "$(row memcheck GpuSlow | cut -f3)" = "timed out" ] || fail "GpuSlow must time out" "$summary"
grep -q "timed out after 2 s" "$work/out/sanitizer/memcheck/GpuSlow.txt" || fail "no timeout note" "$summary"
[ "$(row memcheck GpuFailing | cut -f3)" = failed ] || fail "GpuFailing must fail" "$summary"
[ "$(row racecheck EngineBig)" = $'2\t0\tclean' ] || fail "the suite run alone: $(row racecheck EngineBig)" "$summary"
[ -s "$work/out/sanitizer/racecheck/Inst_GpuRacy.txt" ] || fail "no log for Inst/GpuRacy" "$work/all.txt"
grep -q "32 runs, 15 clean, 4 without GPU work, 4 skipped, 9 not clean" "$work/all.txt" ||
  fail "the closing count" "$work/all.txt"
run picked K3PERF_SANITIZER_SUITES='^(GpuClean|EngineBig|GpuCpuOnly|RangeProfiler)$' K3PERF_SANITIZER_TOOLS="memcheck initcheck"
[ "$code" -eq 0 ] || fail "the clean suites alone must pass (exit $code)" "$work/picked.txt"
[ "$(($(wc -l < "$summary") - 1))" -eq 8 ] || fail "4 suites x 2 tools must be 8 rows" "$summary"
run none K3PERF_SANITIZER_SUITES='^NoSuchSuite$'
[ "$code" -eq 2 ] || fail "a filter matching no suite must exit 2 (exit $code)" "$work/none.txt"
echo "ok: gpu-sanitize.sh runs every suite under every tool and reports findings, failures and timeouts apart"
