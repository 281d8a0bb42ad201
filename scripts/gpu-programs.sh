# Sourced by the scripts that run on an H200 machine (gpu-check.sh, engine-bench.sh): sets `out` (the
# results folder, $OUT or bench/results/incoming) and `bin` (the folder of gpu_tests, k3perf and the
# bench/gpu drivers) — from the bundle in $K3PERF_GPU_BUNDLE (scripts/gpu-bundle.sh; the CUDA toolkit's
# own libraries come from the machine), else built here with the gpu preset.
out="${OUT:-bench/results/incoming}"
mkdir -p "$out"
if [ -n "${K3PERF_GPU_BUNDLE:-}" ]; then
  bin="$K3PERF_GPU_BUNDLE/bin"
  cuda_lib="$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")/../lib64"
  export LD_LIBRARY_PATH="$K3PERF_GPU_BUNDLE/lib:$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  cmake --preset gpu && cmake --build build/gpu -j "$(nproc)" || exit 1
  mkdir -p build/gpu/bin
  ln -sf ../tests/gpu_tests ../cli/k3perf ../bench/gpu/device_probe build/gpu/bin/
  for bench in build/gpu/bench/gpu/*_bench; do ln -sf "../bench/gpu/$(basename "$bench")" build/gpu/bin/; done
  bin=build/gpu/bin
fi
