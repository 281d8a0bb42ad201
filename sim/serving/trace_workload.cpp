#include "sim/serving/trace_workload.h"

#include "core/error.h"
#include "core/limits.h"
#include "sim/cache/prefix_cache.h"
#include "sim/workload/azure_reader.h"
#include "sim/workload/mooncake_reader.h"

#include <fmt/format.h>

#include <cmath>
#include <tuple>
#include <utility>

namespace k3::serving {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Replicas that prefill, and so hold a share of the cache pool.
int prefilling_replicas(const ServingOptions& o) { return o.disaggregated ? o.prefill_replicas : o.replicas; }

}  // namespace

ServingCacheOptions read_serving_cache(const ServingScenario& s) {
  ServingCacheOptions out;
  cache::CacheConfig& c = out.config;
  c.nodes = prefilling_replicas(s.options);
  c.pooled = true;
  if (!s.cache) return out;
  const YamlNode& n = *s.cache;
  n.expect_keys({"enabled", "hash_block_tokens", "allocation_block_tokens", "checkpoint", "checkpoint_interval_tokens",
                 "eviction", "hbm_gib"});
  if (auto v = n.find("enabled")) out.enabled = v->as_bool();
  if (auto v = n.find("hash_block_tokens")) c.hash_block_tokens = read_int<int64_t>(*v, at_least(limit::tokens, 1));
  if (auto v = n.find("allocation_block_tokens"))
    c.allocation_block_tokens = read_int<int64_t>(*v, at_least(limit::tokens, 1));
  // A policy is `name` or `{name: ..., <parameter>: value}`; checkpoint_interval_tokens is short for
  // the checkpoint policy's interval_tokens.
  if (auto v = n.find("checkpoint")) std::tie(c.checkpoint, c.checkpoint_params) = name_and_params(*v);
  if (auto v = n.find("checkpoint_interval_tokens"))
    c.checkpoint_params.set("interval_tokens", read_int<int64_t>(*v, at_least(limit::tokens, 1)));
  if (auto v = n.find("eviction")) std::tie(c.eviction, c.eviction_params) = name_and_params(*v);
  if (auto v = n.find("hbm_gib")) c.tiers[0].capacity_bytes = v->as_positive() * 1024.0 * 1024.0 * 1024.0;
  try {
    cache::validate(c);
  } catch (const InputError& e) {
    n.fail(e.what());
  }
  return out;
}

std::vector<workload::Request> read_trace_requests(const RequestSource& src) {
  K3_CHECK(!src.trace_path.empty(), "no trace file to read");
  std::vector<workload::Request> r;
  if (ends_with(src.trace_path, ".jsonl")) {
    r = workload::read_mooncake_trace(src.trace_path);
  } else if (ends_with(src.trace_path, ".csv")) {
    r = workload::read_azure_trace(src.trace_path);
  } else {
    throw InputError(fmt::format("{}: expected a Mooncake .jsonl or an Azure .csv trace", src.trace_path));
  }
  if (src.limit > 0 && static_cast<int64_t>(r.size()) > src.limit) r.resize(static_cast<std::size_t>(src.limit));
  if (r.empty()) throw InputError(fmt::format("{}: the trace holds no requests", src.trace_path));
  for (std::size_t i = 0; i < r.size(); ++i) {
    r[i].id = static_cast<int64_t>(i);
    r[i].arrival_ms *= src.time_scale;
  }
  return r;
}

TraceWorkload trace_workload(const ServingScenario& s, std::vector<workload::Request> requests) {
  TraceWorkload out;
  const ServingCacheOptions c = read_serving_cache(s);
  out.cache_config = c.config;
  bool hashed = true;
  for (const workload::Request& r : requests) hashed = hashed && r.block_tokens > 0 && !r.block_hashes.empty();
  out.cached = c.enabled && hashed;
  if (out.cached) {
    const cache::CacheSizes sizes = cache::cache_sizes(s.deployment.model, s.deployment.precision);
    const std::vector<cache::RequestOutcome> hits = cache::simulate(requests, c.config, sizes);
    out.workload.cached_prefix_tokens.reserve(hits.size());
    for (const cache::RequestOutcome& h : hits) out.workload.cached_prefix_tokens.push_back(h.hit_tokens);
    out.cache_summary = cache::summarize(requests, hits, {}, nullptr);
  }
  out.requests = static_cast<int64_t>(requests.size());
  for (const workload::Request& q : requests) {
    out.prompt_tokens += q.input_tokens;
    out.output_tokens += q.output_tokens;
  }
  out.workload.requests = std::move(requests);
  out.workload.from_trace = true;
  return out;
}

TraceWorkload trace_workload(const ServingScenario& s) { return trace_workload(s, read_trace_requests(s.requests)); }

double mean_rate_per_s(const std::vector<workload::Request>& r) {
  const double span_ms = r.size() < 2 ? 0.0 : r.back().arrival_ms - r.front().arrival_ms;
  if (span_ms <= 0) throw InputError(fmt::format("{} requests arriving at one instant have no rate", r.size()));
  return double(r.size() - 1) * 1000.0 / span_ms;
}

std::string format_trace(const ServingScenario& s, const TraceWorkload& t) {
  std::string out = fmt::format("  trace       {}: {} requests, {} prompt and {} output tokens", s.requests.trace_path,
                                t.requests, t.prompt_tokens, t.output_tokens);
  if (s.requests.time_scale != 1.0) out += fmt::format(", arrivals x{:g}", s.requests.time_scale);
  out += "\n";
  if (!t.cached) return out + "  cache       none (disabled, or the trace has no prefix hashes)\n";
  const cache::CacheConfig& c = t.cache_config;
  const double hbm = c.tiers[0].capacity_bytes;
  const std::string pool = std::isinf(hbm)
                               ? "unbounded"
                               : fmt::format("{:.0f} GiB x {} replicas", hbm / (1024.0 * 1024.0 * 1024.0), c.nodes);
  const cache::CacheSummary& m = t.cache_summary;
  out += fmt::format(
      "  cache       prefix cache of {} pool, '{}' checkpoints, {} eviction: token hit rate {:.2f}% (KV alone "
      "{:.2f}%), "
      "{} prompt tokens not prefilled\n",
      pool, c.checkpoint, c.eviction, 100 * m.token_hit_rate(), 100 * m.kv_hit_rate(), m.hit_tokens);
  return out;
}

nlohmann::ordered_json to_json(const ServingScenario& s, const TraceWorkload& t) {
  nlohmann::ordered_json j;
  j["source"] = s.requests.trace_path;
  j["requests"] = t.requests;
  j["time_scale"] = s.requests.time_scale;
  j["prefix_cache"] = t.cached;
  if (t.cached) {
    const cache::CacheSizes sizes = cache::cache_sizes(s.deployment.model, s.deployment.precision);
    j["cache"] = cache::to_json(t.cache_config, sizes, t.cache_summary);
  }
  return j;
}

Workload serving_workload(const ServingScenario& s, std::optional<TraceWorkload>* trace) {
  if (s.requests.trace_path.empty()) {
    if (s.cache) s.cache->fail("the prefix cache runs on a trace: give serving.requests.trace");
    return fixed_rate_workload(s.requests);
  }
  TraceWorkload t = trace_workload(s);
  Workload w = std::move(t.workload);
  t.workload = Workload{};
  for (workload::Request& r : w.requests) std::vector<uint64_t>().swap(r.block_hashes);
  if (trace) *trace = std::move(t);
  return w;
}

}  // namespace k3::serving
