#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (Clang, AddressSanitizer + UndefinedBehaviorSanitizer) in build/fuzz and
# runs each for SECONDS (default 60), seeded with the committed inputs of its format (tests/fuzz/seeds/ where the tree
# has none) and tests/fuzz/boundary.dict.
# Findings (crash-*, leak-*, timeout-*) land in build/fuzz/findings/<target>/; the exit status is 1 if any target
# found one.
#   scripts/fuzz.sh [SECONDS] [TARGET...]      targets: json yaml chrome_trace safetensors (default: all)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(json yaml chrome_trace safetensors)
build="$root/build/fuzz"
jobs="${FUZZ_BUILD_JOBS:-2}"

flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DK3PERF_CUDA=OFF \
  -DK3PERF_BUILD_TESTS=OFF -DK3PERF_BUILD_BENCH=OFF -DK3PERF_FUZZ=ON ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} >/dev/null
cmake --build "$build" -j "$jobs" --target "${targets[@]/#/fuzz_}"

# Seeds: the committed files of each format, copied so that the fuzzer's additions stay out of the tree.
seed() {
  local target="$1" corpus="$build/corpus/$1"
  mkdir -p "$corpus"
  case "$target" in
    json) cp "$root"/scenarios/models/*.json "$corpus"/ ;;
    yaml) cp "$root"/scenarios/hardware/*.yaml "$corpus"/ ;;
    chrome_trace) find "$root/tests/data" -name '*.json.gz' -size -200k | head -4 | xargs -I{} cp {} "$corpus"/ ;;
    safetensors) cp "$root"/tests/fuzz/seeds/safetensors/* "$corpus"/ ;;
  esac
  echo "$corpus"
}

status=0
for target in "${targets[@]}"; do
  corpus="$(seed "$target")"
  findings="$build/findings/$target"
  mkdir -p "$findings"
  echo "== fuzz_$target for ${seconds} s"
  if ! (cd "$findings" && "$build/tests/fuzz/fuzz_$target" "$corpus" -dict="$root/tests/fuzz/boundary.dict" \
    -max_total_time="$seconds" -max_len=1048576 -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 2>&1 |
    grep -E '^(#[0-9]+ +DONE|stat::|==[0-9]+==ERROR|SUMMARY|Done)' ); then
    :
  fi
  if compgen -G "$findings/crash-*" >/dev/null || compgen -G "$findings/leak-*" >/dev/null ||
    compgen -G "$findings/timeout-*" >/dev/null || compgen -G "$findings/oom-*" >/dev/null; then
    echo "fuzz_$target: findings in $findings"
    status=1
  fi
done
exit "$status"
