# The two commands of the README. Both install the dependencies first (scripts/setup-deps.sh is
# idempotent), then configure and build with the CMake presets.
#   make demo   build Release and run the main job (k3perf on its embedded default scenario)
#   make test   build and run every test
.PHONY: demo test build bench clean

JOBS ?= $(shell nproc 2>/dev/null || echo 2)

build:
	./scripts/setup-deps.sh
	cmake --preset release
	cmake --build build/release -j $(JOBS)

demo: build
	./build/release/cli/k3perf

test: build
	ctest --test-dir build/release --output-on-failure -j $(JOBS)

bench: build
	./build/release/bench/k3perf_bench_sim

clean:
	rm -rf build
