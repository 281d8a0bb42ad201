#!/usr/bin/env bash
# `make demo` builds what it runs and nothing else: the Makefile configures the demo preset and builds its target;
# that preset turns CUDA, the tests and the benchmarks off, and building k3perf in it compiles no CUDA source and
# nothing of tests/, bench/, kernels/ or gui/ (checked on the build graph, so it fails if any of them comes back).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $1"; exit 1; }

recipe="$(make -C "$root" -n demo 2>/dev/null)"
grep -q -- "cmake --preset demo" <<< "$recipe" || fail "make demo does not configure the demo preset: $recipe"
grep -q -- "cmake --build --preset demo" <<< "$recipe" || fail "make demo does not build the demo preset: $recipe"
if grep -q -- "--preset release\|build/release" <<< "$recipe"; then fail "make demo builds the release tree: $recipe"; fi

cmake -S "$root" --preset demo -B "$work/build" > "$work/configure.txt" 2>&1 || { cat "$work/configure.txt"; fail "configure"; }
for option in K3PERF_CUDA:STRING=OFF K3PERF_BUILD_TESTS:BOOL=OFF K3PERF_BUILD_BENCH:BOOL=OFF; do
  grep -q "^$option$" "$work/build/CMakeCache.txt" || fail "the demo preset does not set $option"
done
grep -q '"targets": \["k3perf"\]' "$root/CMakePresets.json" || fail "the demo build preset does not build k3perf alone"

ninja -C "$work/build" -t commands k3perf > "$work/commands.txt"
grep -q "cli/main.cpp" "$work/commands.txt" || fail "the build graph of k3perf has no cli/main.cpp (wrong target?)"
for unwanted in 'nvcc' '\.cu\b' "$root/tests/" "$root/bench/" "$root/kernels/" "$root/gui/"; do
  if grep -q -- "$unwanted" "$work/commands.txt"; then
    fail "building k3perf in the demo preset runs '$unwanted': $(grep -m1 -- "$unwanted" "$work/commands.txt")"
  fi
done
echo "demo preset: ok ($(wc -l < "$work/commands.txt") commands)"
