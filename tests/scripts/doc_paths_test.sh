#!/usr/bin/env bash
# scripts/check-doc-paths.sh: CONTRIBUTING.md's recipes name only paths that exist, and the check fails on a guide
# that names a missing one (so it can fail).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
"$root/scripts/check-doc-paths.sh" "$root/CONTRIBUTING.md"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
printf 'Edit `core/op_graph.cpp` and `core/no_such_file.cpp`; `sim/claims/` holds `<name>.cpp`.\n' > "$work/guide.md"
if out="$("$root/scripts/check-doc-paths.sh" "$work/guide.md")"; then
  echo "FAIL: a guide naming core/no_such_file.cpp passed"; exit 1
fi
grep -q "core/no_such_file.cpp" <<< "$out" || { echo "FAIL: the missing path is not named: $out"; exit 1; }
if grep -q "op_graph.cpp\|sim/claims" <<< "$out"; then echo "FAIL: existing paths reported: $out"; exit 1; fi
echo "doc paths: ok"
