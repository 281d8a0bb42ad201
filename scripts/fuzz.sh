#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz (one program, k3perf_fuzz: Clang, AddressSanitizer +
# UndefinedBehaviorSanitizer, built by the asan preset in build/asan), each for SECONDS (default 60), seeded with
# the committed inputs of its format and tests/fuzz/boundary.dict, JOBS targets at once (default 1).
#   scripts/fuzz.sh [-j JOBS] [SECONDS] [TARGET...]   build, then run the targets (default: all)
#   scripts/fuzz.sh --list                            the targets
#   scripts/fuzz.sh --bundle OUT.tar.xz               the program, its seeds, the dictionary, the data it loads and
#                                                     this script, to run on another x86-64 Linux machine without
#                                                     Clang: tar xf OUT.tar.xz && k3perf-fuzz/fuzz.sh -j 16 600
# Each run writes to OUT_DIR (default build/asan/fuzz, or fuzz-out beside an unpacked bundle): <target>/log, and
# findings (crash-*, leak-*, timeout-*, oom-*) in <target>/. At the end, one line per target: executions, coverage
# (libFuzzer's cov: and ft: of its last line), findings. The exit status is 1 if any target found something.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

jobs=1
bundle=""
list=0
while [ $# -gt 0 ]; do
  case "$1" in
    -j) jobs="$2"; shift 2 ;;
    -j*) jobs="${1#-j}"; shift ;;
    --bundle) bundle="$2"; shift 2 ;;
    --list) list=1; shift ;;
    *) break ;;
  esac
done
seconds="${1:-60}"
shift || true

if [ -x "$here/k3perf_fuzz" ]; then  # an unpacked bundle: everything lies beside this script
  program="$here/k3perf_fuzz"
  seeds="$here/seeds"
  dict="$here/boundary.dict"
  export K3PERF_DATA_DIR="$here/data"
  out="${OUT_DIR:-$(pwd)/fuzz-out}"
else
  root="$(cd "$here/.." && pwd)"
  build="$root/build/asan"
  program="$build/tests/fuzz/k3perf_fuzz"
  seeds="$build/fuzz/seeds"
  dict="$root/tests/fuzz/boundary.dict"
  out="${OUT_DIR:-$build/fuzz}"
  cmake --preset asan -S "$root" \
    ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} >/dev/null
  cmake --build "$build" -j "${FUZZ_BUILD_JOBS:-2}" --target k3perf_fuzz

  # Seeds: the committed files of each format (tests/fuzz/seeds/<target>/ where the tree has none), copied so
  # that the fuzzer's additions stay out of the tree. Large files are cut: the first lines of a trace seed as well.
  rm -rf "$seeds"
  add() {  # add TARGET FILE...
    local target="$1"
    shift
    mkdir -p "$seeds/$target"
    for f in "$@"; do cp "$f" "$seeds/$target/"; done
  }
  head_of() {  # head_of TARGET LINES FILE
    mkdir -p "$seeds/$1"
    head -n "$2" "$3" >"$seeds/$1/$(basename "$3")"
  }
  for dir in "$root"/tests/fuzz/seeds/*/; do add "$(basename "$dir")" "$dir"*; done
  add config_json "$root"/scenarios/models/*.json
  add hardware_yaml "$root"/scenarios/hardware/*.yaml
  add scenario_yaml "$root"/scenarios/*.yaml
  add serving_yaml "$root"/scenarios/serving/*.yaml "$root"/scenarios/breakeven/*.yaml
  add claim_yaml "$root"/scenarios/claims/*.yaml
  add chrome_trace "$root"/profiler/fixtures/*.json.gz
  add gzip "$root"/profiler/fixtures/*.json.gz
  add prediction_json "$root"/profiler/fixtures/*_prediction.json
  add compare_json "$root"/bench/results/2026-11-30-h200-engine-final/compare_b1.json
  add counters_json "$root"/bench/results/2026-11-30-h200-engine-traces-3/counters_b1.json
  for f in "$root"/data/traces/*.jsonl; do head_of mooncake_jsonl 40 "$f"; done
  for f in "$root"/data/traces/*.csv; do head_of azure_csv 40 "$f"; done
  add nccl_table "$root"/bench/results/2026-11-30-h200x2-nccl/sweep.csv
fi

all_targets() { K3PERF_FUZZ_TARGET=list "$program"; }
if [ "$list" = 1 ]; then
  all_targets
  exit 0
fi

if [ -n "$bundle" ]; then
  [ -n "${root:-}" ] || { echo "fuzz.sh: --bundle runs in the source tree" >&2; exit 2; }
  stage="$(mktemp -d)"
  trap 'rm -rf "$stage"' EXIT
  pack="$stage/k3perf-fuzz"
  mkdir -p "$pack/lib" "$pack/data"
  # Symbols stay (a finding's stack names its functions); debug info goes. Shared libraries outside the C library
  # travel along, found through the program's RUNPATH, $ORIGIN/lib (tests/fuzz/CMakeLists.txt).
  objcopy --strip-debug "$program" "$pack/k3perf_fuzz"
  ldd "$program" | awk '$3 ~ /^\// {print $3}' | grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
    while read -r lib; do cp -L "$lib" "$pack/lib/"; done
  cp -r "$seeds" "$pack/seeds"
  cp "$dict" "$0" "$pack/"
  cp -r "$root/scenarios/models" "$root/scenarios/hardware" "$pack/data/"
  cp "$root/scenarios/k3-h200x16-decode-128k.yaml" "$pack/data/"
  tar -C "$stage" -cf - k3perf-fuzz | xz -9e -T1 >"$bundle"
  echo "$bundle: $(stat -c %s "$bundle") bytes; the program $(stat -c %s "$pack/k3perf_fuzz") bytes unpacked"
  exit 0
fi

targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(all_targets)

run_one() {
  local target="$1" dir="$out/$1"
  rm -rf "$dir"
  mkdir -p "$dir/corpus"
  cp -r "$seeds/$target/." "$dir/corpus/" 2>/dev/null || true
  (cd "$dir" && K3PERF_FUZZ_TARGET="$target" "$program" corpus -dict="$dict" -max_total_time="$seconds" \
    -max_len=1048576 -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 >log 2>&1) || true
}

mkdir -p "$out"
echo "fuzzing ${#targets[@]} targets for $seconds s each, $jobs at once, in $out"
running=0
for target in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  run_one "$target" &
  running=$((running + 1))
done
wait || true

status=0
printf '%-18s %12s %8s %8s  %s\n' target execs cov ft findings
for target in "${targets[@]}"; do
  dir="$out/$target"
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)"
  last="$(grep -E '^#[0-9]+' "$dir/log" | tail -1)"
  cov="$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")"
  ft="$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")"
  findings="$(find "$dir" -maxdepth 1 \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) |
    wc -l)"
  note=""
  if [ "$findings" -gt 0 ] || grep -q '^==[0-9]*==ERROR' "$dir/log"; then
    note=" (see $dir/log)"
    status=1
  fi
  printf '%-18s %12s %8s %8s  %s%s\n' "$target" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$findings" "$note"
done
exit "$status"
