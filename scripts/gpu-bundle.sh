#!/usr/bin/env bash
# Builds the GPU programs for sm_90 on this machine and gathers them, with the shared libraries they
# need beyond the C/C++ runtime and the CUDA toolkit's own (cuBLASLt is hundreds of MB and the H200
# machine has the toolkit), into build/gpu-bundle/{bin,lib}: for an H200 machine that has the CUDA
# driver and toolkit but not the project's build dependencies. The build leaves Qt out (PNG plots
# are not needed there). Then, on the H200 machine:
#     K3PERF_GPU_BUNDLE=build/gpu-bundle scripts/gpu-check.sh
# Usage: scripts/gpu-bundle.sh [all | engine]; `engine` gathers gpu_tests, k3perf and the CUPTI injection only
# (what scripts/engine-*.sh run), stripped.
set -euo pipefail
cd "$(dirname "$0")/.."
# BUILD_DIR: an existing CUDA build to reuse (its CUDA architectures must include 90); default a fresh gpu preset.
build="${BUILD_DIR:-build/gpu}"
if [ "$build" = build/gpu ]; then cmake --preset gpu -DCMAKE_DISABLE_FIND_PACKAGE_Qt6=TRUE >/dev/null; fi
what="${1:-all}"
benches="" labs=""
if [ "$what" = all ]; then
  benches="$(cd bench/gpu && ls *_bench.cu device_probe.cu | sed 's/^/k3perf_/; s/\.cu$//')"
  labs="$(cd bench/lab && ls *.cu | sed 's/^/k3perf_lab_/; s/\.cu$//')"
fi
cmake --build "$build" -j "$(nproc)" --target gpu_tests k3perf k3perf_cupti_inject $benches $labs
bundle=build/gpu-bundle
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
cp "$build/tests/gpu_tests" "$build/cli/k3perf" "$bundle/bin/"
# The commit of the build, with "+changes" when the work tree differs from it (traces record it: docs/profile.md).
echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench/results' || echo +changes)" > "$bundle/COMMIT"
if [ "$what" = all ]; then
  cp "$build"/bench/gpu/*_bench "$build/bench/gpu/device_probe" "$bundle/bin/"
  cp "$build"/bench/lab/lab_* "$bundle/bin/"  # the lab's experiments, each checking itself
  if [ -x "$build/bench/nccl_sweep/nccl_sweep" ]; then cp "$build/bench/nccl_sweep/nccl_sweep" "$bundle/bin/"; fi
else
  strip "$bundle"/bin/*
fi
cp "$build/profiler/libk3perf_cupti_inject.so" "$bundle/lib/"  # k3perf profile finds it in ../lib
for exe in "$bundle"/bin/* "$bundle"/lib/libk3perf_cupti_inject.so; do
  ldd "$exe" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*) ;;
      libcublas*|libcudart*|libnccl*) ;;  # the CUDA toolkit's (and NCCL's), on the H200 machine
      *) cp -L "$lib" "$bundle/lib/" ;;
    esac
  done
done
echo "gpu-bundle: $(ls "$bundle/bin" | wc -l) programs, $(ls "$bundle/lib" | wc -l) libraries in $bundle"
