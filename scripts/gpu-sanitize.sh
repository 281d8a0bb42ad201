#!/usr/bin/env bash
# compute-sanitizer over the whole GPU suite on an H200 machine, one run per test suite and tool, so that each run
# finishes (the whole suite under racecheck does not in 300 s) and a finding names its suite.
#   tools   K3PERF_SANITIZER_TOOLS, default "memcheck racecheck initcheck synccheck"
#   suites  every suite `gpu_tests --gtest_list_tests` lists, or those matching the regex K3PERF_SANITIZER_SUITES
#   limits  K3PERF_SANITIZER_TIMEOUT_S per run (default 300); K3PERF_SANITIZER_JOBS runs at once (default 6), except
#           the suites matching K3PERF_SANITIZER_ALONE (default '^Engine': a whole-width engine takes tens of GiB),
#           which run one at a time after the others. Suites matching K3PERF_SANITIZER_SKIP (default '^RangeProfiler$':
#           CUPTI's range profiler cannot subscribe beside compute-sanitizer, CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
#           are listed as skipped, not run.
# Writes $OUT/sanitizer/<tool>/<suite>.txt per run and $OUT/sanitizer/summary.tsv (tool, suite, tests, errors,
# seconds, status: clean, no GPU work (the suite's tests make no CUDA call, so the tool has nothing to check), errors,
# failed, timed out, skipped), a line per run as it ends, so a run cut short keeps what finished. Exits 1 when a run
# is neither clean, without GPU work nor skipped. Usage: [K3PERF_GPU_BUNDLE=DIR] [OUT=DIR] scripts/gpu-sanitize.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-programs.sh
command -v compute-sanitizer > /dev/null || { echo "gpu-sanitize: compute-sanitizer is not on PATH" >&2; exit 2; }
tools="${K3PERF_SANITIZER_TOOLS:-memcheck racecheck initcheck synccheck}"
limit="${K3PERF_SANITIZER_TIMEOUT_S:-300}"
jobs="${K3PERF_SANITIZER_JOBS:-6}"
alone="${K3PERF_SANITIZER_ALONE:-^Engine}"
skip="${K3PERF_SANITIZER_SKIP:-^RangeProfiler\$}"
dir="$out/sanitizer"
mkdir -p "$dir"
summary="$dir/summary.tsv"
printf 'tool\tsuite\ttests\terrors\tseconds\tstatus\n' > "$summary"

# Suites: the unindented lines of the listing ("Suite." or "Prefix/Suite/0.  # TypeParam = ..."), without the dot.
mapfile -t suites < <("$bin/gpu_tests" --gtest_list_tests | sed -n 's/^\([^ ][^ ]*\)\.\( .*\)\{0,1\}$/\1/p' |
                      grep -E "${K3PERF_SANITIZER_SUITES:-.}")
[ "${#suites[@]}" -gt 0 ] || { echo "gpu-sanitize: no suite of $bin/gpu_tests matches" >&2; exit 2; }

# sanitize TOOL SUITE: one run; appends its summary line.
sanitize() {
  local tool="$1" suite="$2" log="$dir/$1/${2//\//_}.txt" start=$SECONDS code status errors tests
  mkdir -p "$dir/$tool"
  timeout --kill-after=30 "$limit" compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/gpu_tests" \
    --gtest_brief=1 --gtest_filter="$suite.*" > "$log" 2>&1
  code=$?
  case "$code" in
    0) status=clean ;;
    9) status=errors ;;
    124 | 137) status="timed out"; echo "timed out after $limit s" >> "$log" ;;
    *) status=failed ;;
  esac
  if [ "$status" = failed ] && grep -q "terminated before first instrumented API call" "$log"; then status="no GPU work"; fi
  # memcheck, initcheck, synccheck: "ERROR SUMMARY: N errors"; racecheck: "... hazards displayed (N errors, M warnings)".
  errors="$(sed -n -e 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p' -e 's/.*hazards\{0,1\} displayed (\([0-9]*\) error.*/\1/p' \
            "$log" | tail -n 1)"
  tests="$(sed -n 's/.*\[==========\] \([0-9]*\) tests\{0,1\} from.*/\1/p' "$log" | tail -n 1)"
  printf '%s\t%s\t%s\t%s\t%d\t%s\n' "$tool" "$suite" "${tests:-?}" "${errors:-?}" $((SECONDS - start)) "$status" \
    >> "$summary"
}

shared=() solo=()
for suite in "${suites[@]}"; do
  if [[ "$suite" =~ $skip ]]; then
    for tool in $tools; do printf '%s\t%s\t-\t-\t0\tskipped\n' "$tool" "$suite" >> "$summary"; done
  elif [[ "$suite" =~ $alone ]]; then solo+=("$suite"); else shared+=("$suite"); fi
done
echo "gpu-sanitize: ${#suites[@]} suites x tools ($tools), $jobs at once (${#solo[@]} alone), limit $limit s each"
for tool in $tools; do
  for suite in "${shared[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    sanitize "$tool" "$suite" &
  done
done
wait
for tool in $tools; do
  for suite in "${solo[@]}"; do sanitize "$tool" "$suite"; done
done
column -t -s $'\t' "$summary" | awk 'NR == 1 || $NF != "clean"'
count() { awk -F'\t' -v s="$1" 'NR > 1 && $6 == s' "$summary" | wc -l; }
runs=$(($(wc -l < "$summary") - 1))
bad=$((runs - $(count clean) - $(count "no GPU work") - $(count skipped)))
echo "gpu-sanitize: $runs runs, $(count clean) clean, $(count "no GPU work") without GPU work, $(count skipped) skipped," \
  "$bad not clean (summary: $summary)"
[ "$bad" -eq 0 ]
