# Sourced by the scripts that run on an H200 machine (gpu-check.sh, engine-bench.sh): sets `out` (the
# results folder, $OUT or bench/results/incoming) and `bin` (the folder of gpu_tests, k3perf and the
# bench/gpu drivers) — from the bundle in $K3PERF_GPU_BUNDLE (scripts/gpu-bundle.sh; the CUDA toolkit's
# own libraries come from the machine), else built here with the gpu preset; or $K3PERF_BIN, a folder holding a
# k3perf built elsewhere (K3PERF_PREDICT_ONLY=1 runs of engine-traces.sh and engine-rank.sh, which need no GPU).
out="${OUT:-bench/results/incoming}"
mkdir -p "$out"
if [ -n "${K3PERF_BIN:-}" ]; then
  bin="$K3PERF_BIN"
elif [ -n "${K3PERF_GPU_BUNDLE:-}" ]; then
  bin="$K3PERF_GPU_BUNDLE/bin"
  cuda_lib="$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")/../lib64"
  export LD_LIBRARY_PATH="$K3PERF_GPU_BUNDLE/lib:$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # The commit the bundle was built at, for the traces' metadata (engine/session/run_session_gpu.cpp).
  if [ -z "${K3PERF_COMMIT:-}" ] && [ -f "$K3PERF_GPU_BUNDLE/COMMIT" ]; then
    K3PERF_COMMIT="$(cat "$K3PERF_GPU_BUNDLE/COMMIT")"
    export K3PERF_COMMIT
  fi
else
  K3PERF_COMMIT="${K3PERF_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}"
  export K3PERF_COMMIT
  cmake --preset gpu && cmake --build build/gpu -j "$(nproc)" || exit 1
  mkdir -p build/gpu/bin
  ln -sf ../tests/gpu_tests ../cli/k3perf ../bench/gpu/device_probe build/gpu/bin/
  for bench in build/gpu/bench/gpu/*_bench; do ln -sf "../bench/gpu/$(basename "$bench")" build/gpu/bin/; done
  bin=build/gpu/bin
fi
