#!/usr/bin/env bash
# k3perf beside AIConfigurator's Kimi K3 bring-up ledger (docs/fidelity.md, "Against AIConfigurator's Kimi K3
# ledger"). Reads the transcribed ledger (bench/results/2026-12-02-aiconfigurator-k3-ledger/ledger.csv) and its
# mapping onto k3perf (mapping.csv there: row, scenario in scenarios/fidelity/aiconfigurator/, metric), predicts
# each scenario once, and prints one Markdown table row per ledger row, in the ledger's units.
# Metrics: `step` (the scenario's step time), `spec_round DECODE.yaml` (the verify pass plus the drafter's time
# from `k3perf spec` on the decode twin, γ = 7, rollback left out as in their step), `ops REGEX` (the exposed time
# of the ops whose names match, summed), `none` (k3perf cannot express the row).
# Usage: [K3PERF=build/release/cli/k3perf] scripts/fidelity-aiconfigurator.sh [--json-dir DIR]
#   --json-dir DIR keeps each scenario's `k3perf predict --json` output there (the per-op breakdown).
set -euo pipefail
cd "$(dirname "$0")/.."
k3perf="${K3PERF:-build/release/cli/k3perf}"
ledger=bench/results/2026-12-02-aiconfigurator-k3-ledger
scenarios=scenarios/fidelity/aiconfigurator
json_dir=""
if [ "${1:-}" = "--json-dir" ]; then
  json_dir="${2:?--json-dir needs a folder}"
fi
[ -x "$k3perf" ] || { echo "fidelity-aiconfigurator: no k3perf at '$k3perf' (set K3PERF)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for s in "$scenarios"/*.yaml; do
  base="$(basename "$s" .yaml)"
  "$k3perf" predict "$s" --top 0 --json "$work/$base.json" > /dev/null 2> "$work/$base.err" ||
    { cat "$work/$base.err" >&2; exit 3; }
  "$k3perf" spec "$s" --draft-tokens 7 --csv "$work/$base.spec.csv" > /dev/null 2>&1 || true  # decode files only
done
[ -z "$json_dir" ] || { mkdir -p "$json_dir" && cp "$work"/*.json "$json_dir"/; }
python3 - "$ledger/ledger.csv" "$ledger/mapping.csv" "$work" << 'EOF'
import csv, json, re, sys
ledger_csv, mapping_csv, work = sys.argv[1:4]
mapping = {m["row"]: m for m in csv.DictReader(open(mapping_csv))}
to_unit = {"ms": 1e-3, "us": 1.0}

def prediction(scenario):
    return json.load(open(f"{work}/{scenario[:-5]}.json"))

def k3perf_us(m):
    metric, _, arg = m["metric"].partition(" ")
    p = prediction(m["scenario"])
    if metric == "step":
        return p["step"]["step_time_us"]
    if metric == "spec_round":
        rows = list(csv.DictReader(open(f"{work}/{arg[:-5]}.spec.csv")))
        return p["step"]["step_time_us"] + float(rows[0]["draft_us"])
    if metric == "ops":
        return sum(op["exposed_us"] for op in p["ops"] if re.search(arg, op["name"]))
    return None

def fmt(x):
    return "—" if x is None else f"{x:.4g}"

def ratio(a, b):
    return "—" if a is None or b is None else f"{a / b:.2f}"

print("| row | their measured | their predicted | k3perf predicted | k3perf/measured | AIConfigurator/measured |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for r in csv.DictReader(open(ledger_csv)):
    unit = r["unit"]
    measured = float(r["measured"]) if r["measured"] else None
    theirs = float(r["predicted"]) if r["predicted"] else None
    ours_us = k3perf_us(mapping[r["row"]])
    ours = None if ours_us is None else ours_us * to_unit[unit]
    label = r["row"] + f" ({unit})"
    print(f"| {label} | {fmt(measured)} | {fmt(theirs)} | {fmt(ours)} | {ratio(ours, measured)} | {ratio(theirs, measured)} |")
EOF
