#!/usr/bin/env bash
# scripts/check-trace.py on a trace the H200 engine wrote before docs/profile.md's trace fixes (2026-12-03, batch 1,
# 8 K, 24 steps): it must find exactly what that trace lacks (versioned API names, flows, numeric counts, op spans on
# the GPU) and pass what it has (nesting, 24 steps); a wrong step count and an unreadable file are reported.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
trace="$root/bench/results/2026-12-03-h200-moe-wgmma/trace_decode_b1_ctx8192.json.gz"
fail() {
  echo "FAIL: $1"
  cat "$work/out.txt"
  exit 1
}
set +e
python3 "$root/scripts/check-trace.py" "$trace" --steps 24 --json "$work/summary.json" > "$work/out.txt" 2>&1
code=$?
set -e
[ "$code" -eq 1 ] || fail "the old trace must fail (exit $code)"
[ "$(grep -c '^FAIL' "$work/out.txt")" -eq 4 ] || fail "four checks must fail"
for name in api_names flows numeric_counts op_spans_per_step; do
  grep -q "^FAIL $name:" "$work/out.txt" || fail "$name must fail"
done
grep -q "^ok   perfetto_nesting: 0 events" "$work/out.txt" || fail "nothing of it is dropped by Perfetto"
grep -q "^ok   steps: 24 step spans" "$work/out.txt" || fail "it has 24 steps"
grep -q "cudaEventCreate_v3020" "$work/out.txt" || fail "a versioned name is named"
grep -q "2928 without a flow" "$work/out.txt" || fail "the kernels without flows are counted"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert not d["checks"]["flows"]["ok"]' \
  "$work/summary.json" || fail "the JSON summary"
set +e
python3 "$root/scripts/check-trace.py" "$trace" --steps 23 > "$work/out.txt" 2>&1
set -e
grep -q "^FAIL steps: 24 step spans, 23 expected" "$work/out.txt" || fail "a wrong step count must fail"
set +e
python3 "$root/scripts/check-trace.py" "$work/none.json" > "$work/out.txt" 2>&1
code=$?
set -e
[ "$code" -eq 2 ] || fail "a missing file must exit 2 (exit $code)"
echo "ok: check-trace.py finds what an old H200 trace lacks and passes what it has"
