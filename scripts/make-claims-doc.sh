#!/usr/bin/env bash
# Regenerates docs/claims.md: every claim in scenarios/claims/ checked by `k3perf verify`, as Markdown.
# Usage: scripts/make-claims-doc.sh [path/to/k3perf]   (default: build/release/cli/k3perf)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
k3perf="${1:-$root/build/release/cli/k3perf}"
if [[ ! -x "$k3perf" ]]; then
  echo "make-claims-doc: no k3perf at $k3perf (build first: make demo, or pass the binary)" >&2
  exit 2
fi
"$k3perf" --data-dir "$root/scenarios" verify --markdown "$root/docs/claims.md" > /dev/null
echo "wrote $root/docs/claims.md"
