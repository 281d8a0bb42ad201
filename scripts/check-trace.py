#!/usr/bin/env python3
"""Checks a trace k3perf wrote (k3perf or kineto format, .json or .json.gz) for what docs/profile.md promises:

- nothing Perfetto would drop: the complete events of each track (pid, tid), in time order, nest;
- API names without CUPTI's version suffix (cudaLaunchKernel, not cudaLaunchKernel_v7000);
- flows: every "s" has one "f" with its id, and every kernel, copy and set with a correlation has exactly one flow
  ending at its start on its track;
- the run's counts in the top-level "k3perf" object are JSON numbers;
- steps: --steps N asks for N steps (k3perf: "step N" spans on the steps track; kineto: ProfilerStep#N), and every
  step holds the same ops on the GPU (the names of its gpu_user_annotation spans), replays included; the number of
  spans may differ, as a kernel that overlaps into a further lane splits its op's span there;
- kineto: a top-level distributedInfo written with `"rank": ` as HTA's pattern needs.

Prints one line per check and a JSON summary with --json FILE; exits 1 when a check fails, 2 on a file it cannot read.
Usage: scripts/check-trace.py TRACE [--steps N] [--json FILE]
"""
import argparse
import collections
import gzip
import json
import re
import sys

GPU_WORK = {"kernel", "memcpy", "memset", "gpu_memcpy", "gpu_memset"}
COUNT_KEYS = ("kernels", "steps", "dropped_records", "flush_period_ms", "copies", "sets")


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8"), json.loads(raw)


def ns(us):
    return round(us * 1000)


def perfetto_drops(events):
    tracks = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X":
            tracks[(e["pid"], e["tid"])].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"]))
    dropped = []
    for track in tracks.values():
        track.sort(key=lambda x: x[0])  # stable: the file's order for equal starts
        open_ends = []
        for start, end, name in track:
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            if open_ends and end > open_ends[-1]:
                dropped.append(name)
                continue
            open_ends.append(end)
    return dropped


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--steps", type=int, help="the number of steps the run made")
    ap.add_argument("--json", help="write the summary here")
    a = ap.parse_args()
    try:
        text, doc = load(a.trace)
    except (OSError, ValueError) as err:
        print(f"check-trace: {a.trace}: {err}", file=sys.stderr)
        return 2
    events = doc.get("traceEvents", [])
    kineto = "distributedInfo" in doc or any(e.get("cat") == "cuda_runtime" for e in events)
    results = {}

    def check(name, ok, detail):
        results[name] = {"ok": bool(ok), "detail": detail}
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")

    dropped = perfetto_drops(events)
    check("perfetto_nesting", not dropped, f"{len(dropped)} events would be dropped {dropped[:5]}")

    api_cats = {"cuda_api", "cuda_runtime", "cuda_driver", "cuda_sync"}
    api = [e for e in events if e.get("ph") == "X" and e.get("cat") in api_cats]
    versioned = sorted({e["name"] for e in api if re.search(r"_v\d{4,}$", e["name"])})
    check("api_names", api and not versioned, f"{len(api)} API calls, versioned names {versioned[:5]}")

    starts = collections.Counter(e["id"] for e in events if e.get("ph") == "s")
    finishes = [e for e in events if e.get("ph") == "f"]
    finish_ids = collections.Counter(e["id"] for e in finishes)
    unpaired = [i for i in set(starts) | set(finish_ids) if starts[i] != 1 or finish_ids[i] != 1]
    at = collections.Counter((e["pid"], e["tid"], ns(e["ts"])) for e in finishes)
    work = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_WORK and "correlation" in e.get("args", {})]
    no_flow = [e["name"] for e in work if at[(e["pid"], e["tid"], ns(e["ts"]))] < 1]
    check("flows", not unpaired and not no_flow and len(finishes) >= len(work),
          f"{len(starts)} flows, {len(work)} GPU events with a correlation, {len(no_flow)} without a flow, "
          f"{len(unpaired)} ids not paired one to one")

    meta = doc.get("k3perf", {})
    not_numbers = [k for k in COUNT_KEYS if k in meta and not isinstance(meta[k], (int, float))]
    check("numeric_counts", meta and not not_numbers,
          f"{sum(k in meta for k in COUNT_KEYS)} counts present, not numbers: {not_numbers}")

    if kineto:
        steps = [e for e in events if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")]
        check("hta_rank", re.search(r'"rank": \d+', text) is not None, "distributedInfo rank as HTA reads it")
    else:
        steps = [e for e in events if e.get("ph") == "X" and e.get("cat") == "nvtx" and e.get("tid") == -2]
    if a.steps is not None:
        check("steps", len(steps) == a.steps, f"{len(steps)} step spans, {a.steps} expected")
    spans = [e for e in events if e.get("ph") == "X" and e.get("cat") == "gpu_user_annotation"]
    if not kineto and steps:
        # A step's GPU work: the op spans that start between its start and the next step's (k3perf's step spans are
        # on the GPU's clock; the last one ends the run).
        bounds = sorted(ns(s["ts"]) for s in steps) + [float("inf")]
        per_step = [set() for _ in steps]
        span_counts = [0 for _ in steps]
        for e in spans:
            t = ns(e["ts"])
            for i in range(len(steps)):
                if bounds[i] <= t < bounds[i + 1]:
                    per_step[i].add(e["name"])
                    span_counts[i] += 1
                    break
        same = all(ops == per_step[0] for ops in per_step)
        check("op_spans_per_step", spans and same,
              f"{len(spans)} op spans on the GPU, {sorted({len(ops) for ops in per_step})} ops per step "
              f"({min(span_counts)}-{max(span_counts)} spans), {'the same' if same else 'differing'} ops in "
              f"the {len(steps)} steps")
    else:
        check("op_spans", bool(spans), f"{len(spans)} op spans on the GPU")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"trace": a.trace, "format": "kineto" if kineto else "k3perf", "checks": results}, f, indent=1)
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
