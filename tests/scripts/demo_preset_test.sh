#!/usr/bin/env bash
# `make demo` builds what it runs and nothing else: the Makefile configures the demo preset and builds its target;
# that preset turns CUDA, the tests, the benchmarks and the Python module off and builds in unity batches, and
# building k3perf in it compiles no CUDA source and nothing of tests/, bench/, kernels/, gui/ or python/ (checked on
# the build graph and the unity batches' includes, so it fails if any of them comes back).
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
for option in K3PERF_CUDA=OFF K3PERF_BUILD_TESTS=OFF K3PERF_BUILD_BENCH=OFF K3PERF_PYTHON=OFF CMAKE_UNITY_BUILD=ON; do
  grep -Eq "^${option%%=*}:[A-Z]+=${option#*=}$" "$work/build/CMakeCache.txt" || fail "the demo preset does not set $option"
done
grep -q '"targets": \["k3perf"\]' "$root/CMakePresets.json" || fail "the demo build preset does not build k3perf alone"

ninja -C "$work/build" -t commands k3perf > "$work/commands.txt"
# The sources compiled: each command's -c file, a unity batch standing for the files it includes.
sed -n 's/.* -c \([^ ]*\).*/\1/p' "$work/commands.txt" > "$work/compiled.txt"
while read -r batch; do
  sed -n 's/^#include "\(.*\)"$/\1/p' "$batch"
done < <(grep '\.cxx$' "$work/compiled.txt") > "$work/sources.txt"
grep -v '\.cxx$' "$work/compiled.txt" >> "$work/sources.txt"
grep -q "$root/cli/main.cpp" "$work/sources.txt" || fail "the build of k3perf compiles no cli/main.cpp (wrong target?)"
for unwanted in 'nvcc' '\.cu\b' "$root/tests/" "$root/bench/" "$root/kernels/" "$root/gui/" "$root/python/"; do
  if grep -q -- "$unwanted" "$work/commands.txt" "$work/sources.txt"; then
    fail "building k3perf in the demo preset compiles '$unwanted': $(grep -h -m1 -- "$unwanted" "$work/commands.txt" "$work/sources.txt")"
  fi
done
echo "demo preset: ok ($(wc -l < "$work/commands.txt") commands, $(wc -l < "$work/sources.txt") sources)"
