#!/usr/bin/env bash
# The content hash of the engine's sources (kernels/ and engine/runtime/: *.cu, *.cuh, *.h, *.cpp) in the work tree,
# or at a commit: what a calibrated hardware file records as `calibrated_on.engine_sources` and what every build
# compiles in (cmake/engine_sources_hash.cmake computes the same; tests/scripts check that the two agree).
# Usage: scripts/engine-sources-hash.sh [commit]
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C
if [ $# -ge 1 ]; then
  git ls-tree -r --name-only "$1" -- kernels engine/runtime | grep -E '\.(cu|cuh|h|cpp)$' | sort |
    while read -r f; do echo "$f $(git show "$1:$f" | sha256sum | cut -d' ' -f1)"; done
else
  find kernels engine/runtime -type f | grep -E '\.(cu|cuh|h|cpp)$' | sort |
    while read -r f; do echo "$f $(sha256sum < "$f" | cut -d' ' -f1)"; done
fi | sha256sum | cut -c1-16
