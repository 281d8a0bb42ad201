// `import k3perf`: the verbs with a JSON output as Python functions that return that JSON as dicts and lists (tables
// as lists of row dicts, which pandas.DataFrame reads). Each calls the libraries as the CLI does and builds its result
// with the function the CLI's --json writes (cli/verb_runs.h, sim/, profiler/), so the two cannot drift. Bad input
// raises ValueError with the library's message (the file, key and value); docs/python.md.
#include "cli/verb_runs.h"
#include "core/error.h"
#include "core/scenario.h"
#include "core/version.h"
#include "sim/claims/claim.h"
#include "sim/claims/claim_report.h"
#include "sim/predict.h"

#include <fmt/core.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace py = pybind11;

namespace k3::python_module {
namespace {

// JSON in and out through Python's own json module: a dict becomes text the YAML and JSON readers take, and a
// result is exactly what the CLI writes to its --json file, read back.
py::object from_json(const nlohmann::ordered_json& j) { return py::module_::import("json").attr("loads")(j.dump()); }
std::string to_json_text(const py::handle& value) {
  return py::module_::import("json").attr("dumps")(value).cast<std::string>();
}

DataPaths data_paths(const std::optional<std::string>& data_dir) { return DataPaths::resolve(data_dir.value_or("")); }

// `set=`: {"workload.batch": 64, "hardware": "b200"} (each value written as YAML, which JSON is) or
// ["workload.batch=64", ...] as on the command line.
std::vector<std::string> assignments(const py::object& sets) {
  std::vector<std::string> out;
  if (sets.is_none()) return out;
  if (py::isinstance<py::dict>(sets)) {
    for (const auto& [key, value] : sets.cast<py::dict>()) {
      out.push_back(py::str(key).cast<std::string>() + "=" +
                    (py::isinstance<py::str>(value) ? value.cast<std::string>() : to_json_text(value)));
    }
    return out;
  }
  if (py::isinstance<py::str>(sets)) return {sets.cast<std::string>()};
  for (const py::handle& item : sets) out.push_back(py::str(item).cast<std::string>());
  return out;
}

// A file path (str or os.PathLike), or None.
std::string path_of(const py::object& value) {
  if (value.is_none()) return "";
  return py::str(py::module_::import("os").attr("fspath")(value)).cast<std::string>();
}

bool is_mapping(const py::object& value) { return py::isinstance<py::dict>(value); }

py::object predict(const py::object& scenario, const py::object& sets, const std::optional<std::string>& data_dir) {
  const DataPaths data = data_paths(data_dir);
  const std::vector<std::string> edits = assignments(sets);
  nlohmann::ordered_json j;
  if (is_mapping(scenario)) {
    const std::string text = to_json_text(scenario);
    py::gil_scoped_release released;
    j = to_json(k3::predict(verbs::load_scenario_text(text, "<scenario dict>", data, edits)));
  } else {
    const std::string path = path_of(scenario);
    py::gil_scoped_release released;
    j = to_json(k3::predict(load_scenario(path, data, edits)));
  }
  return from_json(j);
}

py::object plan(const py::object& scenario, const std::optional<std::string>& model, const py::object& hardware,
                std::optional<int64_t> isl, std::optional<int64_t> osl, std::optional<double> rate,
                std::optional<double> ttft_ms, std::optional<double> tpot_ms, std::optional<double> prefix_hit,
                std::optional<int> gpus_max, const py::object& sets, const py::object& prices, const py::object& price,
                const std::optional<std::string>& data_dir) {
  verbs::PlanRequest r;
  r.scenario = path_of(scenario);
  k3::plan::PlanQuestion& q = r.question;
  q.model = model.value_or("");
  if (py::isinstance<py::str>(hardware)) {
    q.hardware = {hardware.cast<std::string>()};
  } else if (!hardware.is_none()) {
    q.hardware = hardware.cast<std::vector<std::string>>();
  }
  // The CLI's checks of the same flags (CLI::PositiveNumber, CLI::Range): here as ValueError.
  const auto positive = [](const char* flag, auto v) {
    if (v && *v <= 0) throw InputError(fmt::format("{}={}: expected a positive number", flag, *v));
  };
  positive("isl", isl);
  positive("osl", osl);
  positive("rate", rate);
  positive("ttft_ms", ttft_ms);
  positive("tpot_ms", tpot_ms);
  positive("gpus_max", gpus_max);
  if (prefix_hit && (*prefix_hit < 0 || *prefix_hit >= 1)) {
    throw InputError(fmt::format("prefix_hit={}: expected a fraction in [0, 1)", *prefix_hit));
  }
  q.input_tokens = isl.value_or(0);
  q.output_tokens = osl.value_or(0);
  q.rate_per_s = rate.value_or(0);
  q.ttft_ms = ttft_ms.value_or(0);
  q.tpot_ms = tpot_ms.value_or(0);
  q.prefix_hit = prefix_hit.value_or(-1);
  q.max_gpus = gpus_max.value_or(0);
  r.sets = assignments(sets);
  r.prices_path = path_of(prices);
  if (is_mapping(price)) {
    for (const auto& [name, dollars] : price.cast<py::dict>()) {
      r.prices.push_back(py::str(name).cast<std::string>() + "=" + py::str(dollars).cast<std::string>());
    }
  } else {
    r.prices = assignments(price);
  }
  const DataPaths data = data_paths(data_dir);
  nlohmann::ordered_json j;
  {
    py::gil_scoped_release released;
    j = verbs::plan_json(verbs::run_plan(r, data));
  }
  return from_json(j);
}

py::object cache(const py::kwargs& kwargs) {
  verbs::CacheRequest r;
  std::optional<std::string> data_dir;
  // Keywords as the CLI's flags, '-' written '_': cache(trace=..., hbm_tokens=1e7, curve=True).
  for (const auto& [key_handle, value] : kwargs) {
    const std::string key = py::str(key_handle).cast<std::string>();
    const py::object v = py::reinterpret_borrow<py::object>(value);
    if (v.is_none()) continue;
    if (key == "trace")
      r.trace = path_of(v);
    else if (key == "workload")
      r.workload = path_of(v);
    else if (key == "scenario")
      r.scenario = path_of(v);
    else if (key == "seed")
      r.seed = v.cast<uint64_t>();
    else if (key == "model")
      r.model = v.cast<std::string>();
    else if (key == "kda_state")
      r.kda_state = v.cast<std::string>();
    else if (key == "kv_cache")
      r.kv_cache = v.cast<std::string>();
    else if (key == "hash_block")
      r.config.hash_block_tokens = v.cast<int64_t>();
    else if (key == "allocation_block")
      r.config.allocation_block_tokens = v.cast<int64_t>();
    else if (key == "checkpoint")
      r.config.checkpoint = v.cast<std::string>();
    else if (key == "checkpoint_interval")
      r.checkpoint_interval_tokens = v.cast<int64_t>();
    else if (key == "eviction")
      r.config.eviction = v.cast<std::string>();
    else if (key == "marconi_alpha")
      r.marconi_alpha_requests = v.cast<double>();
    else if (key == "hbm_gib")
      r.hbm_gib = v.cast<double>();
    else if (key == "hbm_tokens")
      r.hbm_tokens = v.cast<double>();
    else if (key == "dram_gib")
      r.dram_gib = v.cast<double>();
    else if (key == "dram_gb_per_s")
      r.dram_gb_per_s = v.cast<double>();
    else if (key == "ssd_gib")
      r.ssd_gib = v.cast<double>();
    else if (key == "ssd_gb_per_s")
      r.ssd_gb_per_s = v.cast<double>();
    else if (key == "nodes")
      r.config.nodes = v.cast<int>();
    else if (key == "pooled")
      r.config.pooled = v.cast<bool>();
    else if (key == "routing")
      r.routing = v.cast<std::string>();
    else if (key == "price_hit")
      r.prices.hit_per_mtok = v.cast<double>();
    else if (key == "price_miss")
      r.prices.miss_per_mtok = v.cast<double>();
    else if (key == "price_output")
      r.prices.output_per_mtok = v.cast<double>();
    else if (key == "curve")
      r.curve = v.cast<bool>();
    else if (key == "data_dir")
      data_dir = v.cast<std::string>();
    else
      throw InputError(
          fmt::format("cache: unknown keyword '{}' (the flags of `k3perf cache --help`, '-' as '_')", key));
  }
  const DataPaths data = data_paths(data_dir);
  nlohmann::ordered_json j;
  {
    py::gil_scoped_release released;
    j = verbs::cache_json(verbs::run_cache(r, data), r);
  }
  return from_json(j);
}

py::object breakeven(const py::object& file, const py::object& sets, const py::object& trace,
                     const std::optional<std::string>& data_dir) {
  const std::string path = path_of(file), trace_path = path_of(trace);
  const std::vector<std::string> edits = assignments(sets);
  const DataPaths data = data_paths(data_dir);
  nlohmann::ordered_json j;
  {
    py::gil_scoped_release released;
    j = verbs::breakeven_json(verbs::run_breakeven(path, edits, trace_path, data));
  }
  return from_json(j);
}

py::object compare(const py::object& prediction, const py::object& trace, const py::object& counters,
                   const std::string& hardware, bool force, const std::optional<std::string>& data_dir) {
  verbs::CompareRequest r;
  if (is_mapping(prediction)) {  // predict()'s result
    r.prediction = "<prediction dict>";
    r.prediction_text = to_json_text(prediction);
  } else {
    r.prediction = path_of(prediction);
  }
  r.trace = path_of(trace);
  r.counters = path_of(counters);
  r.hardware = hardware;
  r.force = force;
  const DataPaths data = data_paths(data_dir);
  nlohmann::ordered_json j;
  {
    py::gil_scoped_release released;
    j = verbs::compare_json(verbs::run_compare(r, data));
  }
  return from_json(j);
}

py::object verify(const py::object& claims, const std::optional<std::string>& data_dir) {
  const std::vector<std::string> only = assignments(claims);
  const DataPaths data = data_paths(data_dir);
  nlohmann::ordered_json j;
  {
    py::gil_scoped_release released;
    std::vector<ClaimResult> results;
    for (const Claim& c : load_claims(data.claims_dir)) {
      if (only.empty() || std::find(only.begin(), only.end(), c.id) != only.end())
        results.push_back(check_claim(c, data));
    }
    if (results.empty()) throw InputError("verify: no claim matched claims=");
    j = to_json(results);
  }
  return from_json(j);
}

}  // namespace
}  // namespace k3::python_module

PYBIND11_MODULE(k3perf, m) {
  using namespace pybind11::literals;
  m.doc() =
      "k3perf: performance of Kimi K3 and its family. Each function returns what the CLI verb of the same name "
      "writes with --json, as dicts and lists (tables are lists of row dicts: pandas.DataFrame(result['ops'])). "
      "Bad input raises ValueError naming the file, key and value. docs/python.md";
  m.attr("__version__") = k3::k3perf_version();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const k3::InputError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const std::filesystem::filesystem_error& e) {
      PyErr_SetString(PyExc_ValueError, (e.path1().string() + ": " + e.code().message()).c_str());
    }
  });
  m.def("predict", &k3::python_module::predict, "scenario"_a, py::kw_only(), "set"_a = py::none(),
        "data_dir"_a = py::none(),
        "Predict one scenario (a YAML path, or a dict of its keys) with `set` edits ({'workload.batch': 64}); the "
        "JSON of `k3perf predict --json`: step, memory_per_gpu, by_module, ops (one row per op), ...");
  m.def("plan", &k3::python_module::plan, "scenario"_a = py::none(), py::kw_only(), "model"_a = py::none(),
        "hardware"_a = py::none(), "isl"_a = py::none(), "osl"_a = py::none(), "rate"_a = py::none(),
        "ttft_ms"_a = py::none(), "tpot_ms"_a = py::none(), "prefix_hit"_a = py::none(), "gpus_max"_a = py::none(),
        "set"_a = py::none(), "prices"_a = py::none(), "price"_a = py::none(), "data_dir"_a = py::none(),
        "Capacity planning, as `k3perf plan`: a serving YAML, or the one-command question (isl, osl, rate, ttft_ms "
        "and/or tpot_ms); price={'h200-sxm': 3.5}. The JSON of `k3perf plan --json`: ranked, pareto, candidates "
        "(rows)");
  m.def("cache", &k3::python_module::cache,
        "The hybrid prefix cache, as `k3perf cache`: trace= or workload=, and the CLI's flags as keywords ('-' as "
        "'_': hbm_tokens=1e7, curve=True). The JSON of `k3perf cache --json`");
  m.def("breakeven", &k3::python_module::breakeven, "file"_a, py::kw_only(), "set"_a = py::none(),
        "trace"_a = py::none(), "data_dir"_a = py::none(),
        "Where the hybrid beats all-MLA, as `k3perf breakeven`; the JSON of `k3perf breakeven --json`: metrics "
        "(crossings), curve (one row per prompt length)");
  m.def("compare", &k3::python_module::compare, "prediction"_a, py::kw_only(), "trace"_a = py::none(),
        "counters"_a = py::none(), "hardware"_a = "h200-sxm", "force"_a = false, "data_dir"_a = py::none(),
        "A prediction (a JSON path, or predict()'s dict) against a measured trace and/or counters, as `k3perf "
        "compare`; the JSON of `k3perf compare --json`: ops (rows), by_kind, step, ...");
  m.def("verify", &k3::python_module::verify, py::kw_only(), "claims"_a = py::none(), "data_dir"_a = py::none(),
        "Check the published claims (all, or claims=['P16']), as `k3perf verify`; the JSON of `k3perf verify "
        "--json`: summary, claims");
}
