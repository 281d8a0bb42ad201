"""The Python module k3perf, run from the build tree by ctest (PYTHONPATH=<build>/python).

Each function must return what its CLI verb writes with --json for the same inputs; the CLI runs here as a separate
program. Beside that, values checked by hand: memory parts that add up, the batch a --set asked for, the ranked
plans feasible and the Pareto front among them, curve rows with the CSV's values, errors that carry the CLI's
message.
"""
import csv
import json
import os
import subprocess
import tempfile
import unittest

import k3perf

SOURCE = os.environ["K3PERF_SOURCE_DIR"]
CLI = os.environ["K3PERF_CLI"]
SCENARIO = os.path.join(SOURCE, "scenarios", "k3-h200x16-decode-128k.yaml")
RESULTS = os.path.join(SOURCE, "bench", "results", "2026-12-01-h200-engine-traces-9")


def source(*parts):
    return os.path.join(SOURCE, *parts)


def cli(*args):
    return subprocess.run([CLI, *args], capture_output=True, text=True)


def cli_json(*args):
    """The CLI's --json output for these arguments."""
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "out.json")
        r = cli(*args, "--json", path)
        if r.returncode != 0:
            raise AssertionError(f"k3perf {' '.join(args)}: status {r.returncode}\n{r.stderr}")
        with open(path) as f:
            return json.load(f)


def cli_error(*args):
    """The message of the CLI's input error (status 2), without its 'k3perf: error: ' prefix."""
    r = cli(*args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    return r.stderr.strip().removeprefix("k3perf: error: ")


class Predict(unittest.TestCase):
    def test_equals_the_cli_json(self):
        got = k3perf.predict(SCENARIO, set={"workload.batch": 2})
        self.assertEqual(got, cli_json("predict", SCENARIO, "--set", "workload.batch=2"))
        self.assertEqual(got["format"], "k3perf-prediction")
        self.assertEqual(got["scenario"]["batch"], 2)
        m = got["memory_per_gpu"]
        parts = m["weights_bytes"] + m["kv_bytes"] + m["kda_state_bytes"] + m["activation_bytes"] + m["reserved_bytes"]
        self.assertAlmostEqual(m["total_bytes"], parts, delta=1e-9 * parts)
        self.assertEqual(m["fits"], m["total_bytes"] <= m["usable_bytes"])
        # The ops table: one row dict per op (a data frame's rows), each with the table's columns, a collective with
        # its own; the step is the sum of what each op leaves exposed (an op beside another hides part of its time).
        self.assertGreater(len(got["ops"]), 1000)
        self.assertTrue(all({"name", "kind", "layer", "bound", "time_us"} <= set(op) for op in got["ops"]))
        self.assertTrue(all(("collective" in op) == (op["kind"] == "collective") for op in got["ops"]))
        exposed = sum(op["exposed_us"] for op in got["ops"])
        self.assertAlmostEqual(got["step"]["step_time_us"], exposed, delta=1e-9 * exposed)
        self.assertLess(exposed, sum(op["time_us"] for op in got["ops"]))

    def test_a_dict_is_the_file(self):
        scenario = {
            "name": "Kimi K3 on 16x H200 SXM, decode at 128K context",
            "model": "kimi-k3",
            "hardware": "h200-sxm",
            "gpus": 16,
            "parallelism": {"tp": 8, "attention_dp": 2, "ep": 16},
            "precision": {"kv_cache": "bf16", "kda_state": "fp32"},
            "phase": "decode",
            "workload": {"batch": 4, "context_tokens": 131072},
            "runtime": {"cuda_graphs": True},
        }
        from_dict = k3perf.predict(scenario, set=["workload.batch=2"])
        from_file = k3perf.predict(SCENARIO, set={"workload.batch": 2})
        self.assertEqual(from_dict["scenario"]["source"], "<scenario dict>")
        from_dict["scenario"]["source"] = from_file["scenario"]["source"]
        self.assertEqual(from_dict, from_file)

    def test_bad_input_raises_value_error_with_the_cli_message(self):
        with self.assertRaises(ValueError) as e:
            k3perf.predict(SCENARIO, set={"hardware": "tpu-v9"})
        self.assertIn("tpu-v9", str(e.exception))
        self.assertEqual(str(e.exception), cli_error("predict", SCENARIO, "--set", "hardware=tpu-v9"))
        missing = os.path.join(SOURCE, "scenarios", "no-such-scenario.yaml")
        with self.assertRaises(ValueError) as e:
            k3perf.predict(missing)
        self.assertEqual(str(e.exception), cli_error("predict", missing))
        with self.assertRaises(ValueError) as e:
            k3perf.predict(SCENARIO, set={"workload.batch": -3})
        self.assertIn("workload.batch", str(e.exception))


class Plan(unittest.TestCase):
    QUESTION = dict(model="kimi-k3", hardware="h200-sxm", isl=8192, osl=1024, rate=10, ttft_ms=2000, tpot_ms=50)
    SETS = ["plan.attention_dp=[2]", "plan.ep=[8]", "plan.modes=[aggregated]"]

    def test_equals_the_cli_json(self):
        got = k3perf.plan(**self.QUESTION, set=self.SETS)
        flags = ["--model", "kimi-k3", "--hardware", "h200-sxm", "--isl", "8192", "--osl", "1024", "--rate", "10",
                 "--ttft-ms", "2000", "--tpot-ms", "50", "--quiet"]
        for s in self.SETS:
            flags += ["--set", s]
        self.assertEqual(got, cli_json("plan", *flags))
        # 1 attention_dp x 1 ep x 3 max_sequences x 2 max_batched_tokens x 2 KV formats, aggregated only.
        self.assertEqual(len(got["candidates"]), 12)
        self.assertTrue(got["ranked"])
        self.assertTrue(all(c["feasible"] for c in got["ranked"]))
        gpus = [c["gpus"] for c in got["ranked"]]
        self.assertEqual(gpus, sorted(gpus))  # rank_by gpus
        ranked = {c["label"] for c in got["ranked"]}
        self.assertTrue({c["label"] for c in got["pareto"]} <= ranked)

    def test_an_incomplete_question_names_what_is_missing(self):
        with self.assertRaises(ValueError) as e:
            k3perf.plan(model="kimi-k3", isl=8192)
        self.assertIn("missing: --osl, --rate, --ttft-ms or --tpot-ms", str(e.exception))
        with self.assertRaises(ValueError):
            k3perf.plan(**dict(self.QUESTION, rate=-1))


class Cache(unittest.TestCase):
    TRACE = source("data", "traces", "conversation_trace.jsonl")

    def test_equals_the_cli_json(self):
        got = k3perf.cache(trace=self.TRACE, hbm_tokens=1e7, curve=True)
        self.assertEqual(got, cli_json("cache", "--trace", self.TRACE, "--hbm-tokens", "1e7", "--curve"))
        self.assertEqual(got["trace"]["requests"], 12031)  # data/traces/SOURCES.md
        # The curve's point at 1e7 tokens of HBM is the run at hbm_tokens=1e7 itself; hits are a share of the input.
        curve = {p["capacity_tokens"]: p for p in got["curve"]}
        self.assertEqual(sorted(curve), [1e4, 1e5, 1e6, 1e7, 1e8, 1e9])
        self.assertEqual(curve[1e7]["token_hit_rate"], got["summary"]["token_hit_rate"])
        s = got["summary"]
        self.assertAlmostEqual(s["token_hit_rate"], s["hit_tokens"] / s["input_tokens"], delta=1e-12)
        self.assertTrue(all(0 <= p["token_hit_rate"] <= 1 for p in got["curve"]))

    def test_unknown_keyword(self):
        with self.assertRaises(ValueError) as e:
            k3perf.cache(trace=self.TRACE, hbm_tokenz=1e7)
        self.assertIn("hbm_tokenz", str(e.exception))


class Breakeven(unittest.TestCase):
    FILE = source("scenarios", "breakeven", "k3-h200x16-chat.yaml")
    TRACE = source("data", "traces", "AzureLLMInferenceTrace_conv.csv")

    def test_equals_the_cli_json_and_csv(self):
        got = k3perf.breakeven(self.FILE, trace=self.TRACE)
        self.assertEqual(got, cli_json("breakeven", self.FILE, "--trace", self.TRACE))
        self.assertTrue(all(0 <= m["losing_share"] <= 1 for m in got["metrics"]))
        with tempfile.TemporaryDirectory() as scratch:
            path = os.path.join(scratch, "curves.csv")
            self.assertEqual(cli("breakeven", self.FILE, "--csv", path).returncode, 0)
            with open(path) as f:
                rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), len(got["curve"]))
        for row, mine in zip(rows, got["curve"]):
            self.assertEqual(list(row), list(mine))  # the CSV's columns, in order
            for key, text in row.items():
                value = mine[key]
                if value is None:
                    self.assertEqual(text, "inf", key)  # neither model fits
                elif isinstance(value, bool):
                    self.assertEqual(int(text), int(value), key)
                else:
                    self.assertAlmostEqual(float(text), value, delta=1e-5 * abs(value), msg=key)


class Compare(unittest.TestCase):
    PREDICTION = os.path.join(RESULTS, "pred_decode_b1_ctx8192.json")
    TRACE = os.path.join(RESULTS, "trace_decode_b1_ctx8192.json.gz")

    def test_equals_the_cli_json(self):
        got = k3perf.compare(self.PREDICTION, trace=self.TRACE)
        self.assertEqual(got, cli_json("compare", "--prediction", self.PREDICTION, "--trace", self.TRACE))
        self.assertEqual(got["format"], "k3perf-compare")

    def test_a_prediction_dict_is_the_file(self):
        with open(self.PREDICTION) as f:
            prediction = json.load(f)
        from_dict = k3perf.compare(prediction, trace=self.TRACE)
        from_file = k3perf.compare(self.PREDICTION, trace=self.TRACE)
        self.assertEqual(from_dict["prediction"], "<prediction dict>")
        from_dict["prediction"] = from_file["prediction"]
        self.assertEqual(from_dict, from_file)

    def test_shapes_that_differ_are_refused(self):
        other = os.path.join(RESULTS, "pred_decode_b1_ctx131072.json")
        with self.assertRaises(ValueError) as e:
            k3perf.compare(other, trace=self.TRACE)
        self.assertIn("different shapes", str(e.exception))
        self.assertEqual(k3perf.compare(other, trace=self.TRACE, force=True)["format"], "k3perf-compare")


class Verify(unittest.TestCase):
    def test_equals_the_cli_json(self):
        got = k3perf.verify(claims=["P2", "P16"])
        self.assertEqual(got, cli_json("verify", "--claim", "P2", "--claim", "P16"))
        self.assertEqual(got["summary"]["claims"], 2)
        self.assertEqual(got["claims"][0]["values"][0]["reported"]["value"], 104.6)


if __name__ == "__main__":
    unittest.main()
