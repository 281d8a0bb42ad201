# The two commands of the README. Both install the dependencies first (scripts/setup-deps.sh is
# idempotent), then configure and build with the CMake presets.
#   make demo   build the k3perf CLI alone (preset demo: no CUDA, tests, benchmarks or GUI) and run the
#               main job, k3perf on its embedded default scenario
#   make test   build everything (preset release: the GPU engine and kernels where nvcc is) and run every test
.PHONY: demo test build bench clean

JOBS ?= $(shell nproc 2>/dev/null || echo 2)

build:
	./scripts/setup-deps.sh
	cmake --preset release
	cmake --build build/release -j $(JOBS)

demo:
	./scripts/setup-deps.sh
	cmake --preset demo
	cmake --build --preset demo -j $(JOBS)
	./build/demo/cli/k3perf

test: build
	ctest --test-dir build/release --output-on-failure -j $(JOBS)

bench: build
	./build/release/bench/k3perf_bench_sim

clean:
	rm -rf build
