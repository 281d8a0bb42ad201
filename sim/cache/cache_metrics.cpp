#include "sim/cache/cache_metrics.h"

#include "core/error.h"
#include "core/output_header.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

namespace k3::cache {

double request_cost_usd(const RequestOutcome& o, const Prices& p) {
  return (double(o.hit_tokens) * p.hit_per_mtok + double(o.input_tokens - o.hit_tokens) * p.miss_per_mtok +
          double(o.output_tokens) * p.output_per_mtok) /
         1e6;
}

CacheSummary summarize(const std::vector<workload::Request>& requests, const std::vector<RequestOutcome>& outcomes,
                       const Prices& prices, PrefillTimeModel* prefill) {
  K3_CHECK(requests.size() == outcomes.size(), "{} requests but {} outcomes", requests.size(), outcomes.size());
  CacheSummary s;
  struct Session {
    int64_t turns = 0;
    bool kv_matched_later = false;
    bool hit_later = false;
  };
  std::map<int64_t, Session> sessions;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const RequestOutcome& o = outcomes[i];
    ++s.requests;
    s.input_tokens += o.input_tokens;
    s.output_tokens += o.output_tokens;
    s.hit_tokens += o.hit_tokens;
    s.kv_matched_tokens += o.kv_matched_tokens;
    s.recomputed_tokens += o.recomputed_tokens();
    s.requests_with_hit += o.hit_tokens > 0;
    s.requests_kv_hit_state_miss += o.kv_matched_tokens > 0 && o.hit_tokens == 0;
    s.requests_state_shortened += o.hit_tokens > 0 && o.kv_matched_tokens > o.hit_tokens;
    s.checkpoints_written += o.checkpoints_written;
    s.loaded_bytes += o.loaded_bytes;
    s.load_ms += o.load_ms;
    s.cost_usd += request_cost_usd(o, prices);
    if (requests[i].session_id >= 0) {
      Session& ss = sessions[requests[i].session_id];
      if (ss.turns++ > 0) {
        ss.kv_matched_later |= o.kv_matched_tokens > 0;
        ss.hit_later |= o.hit_tokens > 0;
      }
    }
    if (prefill) {
      s.prefill_ms_without_cache += prefill->ttft_ms(o.input_tokens, 0);
      s.prefill_ms_with_cache += prefill->ttft_ms(o.input_tokens - o.hit_tokens, o.hit_tokens) + o.load_ms;
    }
  }
  for (const auto& [id, ss] : sessions) {
    if (ss.turns < 2) continue;
    ++s.sessions_multi_turn;
    s.sessions_never_resumed += ss.kv_matched_later && !ss.hit_later;
  }
  s.has_prefill_time = prefill != nullptr;
  return s;
}

std::vector<CurvePoint> hit_rate_curve(const std::vector<workload::Request>& requests, const CacheConfig& config,
                                       const CacheSizes& sizes, const std::vector<double>& capacities_tokens) {
  std::vector<CurvePoint> out;
  for (double tokens : capacities_tokens) {
    CacheConfig c = config;
    c.tiers.at(0).capacity_bytes = tokens * sizes.kv_bytes_per_token;
    CurvePoint p;
    p.capacity_tokens = tokens;
    p.capacity_bytes = c.tiers[0].capacity_bytes;
    const CacheSummary hybrid = summarize(requests, simulate(requests, c, sizes), {}, nullptr);
    const CacheSummary kv = summarize(requests, simulate(requests, c, kv_only(sizes)), {}, nullptr);
    p.token_hit_rate = hybrid.token_hit_rate();
    p.kv_only_hit_rate = kv.token_hit_rate();
    p.recomputed_tokens = hybrid.recomputed_tokens;
    out.push_back(p);
  }
  return out;
}

namespace {

nlohmann::ordered_json number(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);  // unbounded -> null
}

// A policy's parameters; whole numbers (token counts) as integers.
nlohmann::ordered_json parameters(const std::map<std::string, double>& p) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [key, v] : p) {
    if (v == std::floor(v) && std::fabs(v) < 9.0e15)
      j[key] = static_cast<int64_t>(v);
    else
      j[key] = v;
  }
  return j;
}

}  // namespace

nlohmann::ordered_json to_json(const CacheConfig& c, const CacheSizes& z, const CacheSummary& s) {
  nlohmann::ordered_json j = output_header("k3perf-cache", 1);
  auto& cfg = j["config"];
  cfg["hash_block_tokens"] = c.hash_block_tokens;
  cfg["allocation_block_tokens"] = c.allocation_block_tokens;
  cfg["checkpoint"] = c.checkpoint;
  cfg["checkpoint_parameters"] = parameters(make_checkpoint_policy(c)->parameters());
  cfg["eviction"] = c.eviction;
  cfg["eviction_parameters"] = parameters(make_eviction_policy(c)->parameters());
  cfg["nodes"] = c.nodes;
  cfg["pooled"] = c.pooled;
  cfg["routing"] = c.routing == Routing::session ? "session" : "round_robin";
  cfg["tiers"] = nlohmann::ordered_json::array();
  for (const Tier& t : c.tiers) {
    cfg["tiers"].push_back(
        {{"name", t.name}, {"capacity_bytes", number(t.capacity_bytes)}, {"read_bytes_per_s", t.read_bytes_per_s}});
  }
  j["sizes"] = {{"kv_bytes_per_token", z.kv_bytes_per_token},
                {"state_bytes_per_checkpoint", z.state_bytes},
                {"needs_state", z.needs_state}};
  auto& r = j["summary"];
  r["requests"] = s.requests;
  r["input_tokens"] = s.input_tokens;
  r["output_tokens"] = s.output_tokens;
  r["hit_tokens"] = s.hit_tokens;
  r["token_hit_rate"] = s.token_hit_rate();
  r["kv_matched_tokens"] = s.kv_matched_tokens;
  r["kv_hit_rate"] = s.kv_hit_rate();
  r["recomputed_tokens"] = s.recomputed_tokens;
  r["requests_with_hit"] = s.requests_with_hit;
  r["requests_kv_hit_state_miss"] = s.requests_kv_hit_state_miss;
  r["requests_state_shortened"] = s.requests_state_shortened;
  r["checkpoints_written"] = s.checkpoints_written;
  r["sessions_multi_turn"] = s.sessions_multi_turn;
  r["sessions_never_resumed"] = s.sessions_never_resumed;
  r["loaded_bytes"] = s.loaded_bytes;
  r["load_ms"] = s.load_ms;
  r["cost_usd"] = s.cost_usd;
  r["cost_per_request_usd"] = s.cost_per_request_usd();
  r["cost_per_million_input_tokens_usd"] = s.cost_per_million_input_tokens_usd();
  if (s.has_prefill_time) {
    r["prefill_ms_without_cache"] = s.prefill_ms_without_cache;
    r["prefill_ms_with_cache"] = s.prefill_ms_with_cache;
    r["prefill_ms_saved"] = s.prefill_ms_saved();
  }
  return j;
}

nlohmann::ordered_json to_json(const std::vector<CurvePoint>& curve) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const CurvePoint& p : curve) {
    a.push_back({{"capacity_tokens", p.capacity_tokens},
                 {"capacity_bytes", p.capacity_bytes},
                 {"token_hit_rate", p.token_hit_rate},
                 {"kv_only_hit_rate", p.kv_only_hit_rate},
                 {"recomputed_tokens", p.recomputed_tokens}});
  }
  return a;
}

std::string outcomes_csv(const std::vector<RequestOutcome>& outcomes, const Prices& prices) {
  std::string out =
      "id,node,input_tokens,output_tokens,hit_tokens,kv_matched_tokens,recomputed_tokens,loaded_bytes,load_ms,"
      "checkpoints_written,cost_usd\n";
  for (const RequestOutcome& o : outcomes) {
    out += fmt::format("{},{},{},{},{},{},{},{:.6g},{:.6g},{},{:.6g}\n", o.id, o.node, o.input_tokens, o.output_tokens,
                       o.hit_tokens, o.kv_matched_tokens, o.recomputed_tokens(), o.loaded_bytes, o.load_ms,
                       o.checkpoints_written, request_cost_usd(o, prices));
  }
  return out;
}

std::string curve_csv(const std::vector<CurvePoint>& curve) {
  std::string out = "capacity_tokens,capacity_bytes,token_hit_rate,kv_only_hit_rate,recomputed_tokens\n";
  for (const CurvePoint& p : curve) {
    out += fmt::format("{:.6g},{:.6g},{:.6g},{:.6g},{}\n", p.capacity_tokens, p.capacity_bytes, p.token_hit_rate,
                       p.kv_only_hit_rate, p.recomputed_tokens);
  }
  return out;
}

namespace {

std::string bytes_text(double b) {
  if (!std::isfinite(b)) return "unbounded";
  if (b >= 1e12) return fmt::format("{:.2f} TB", b / 1e12);
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  return fmt::format("{:.2f} MB", b / 1e6);
}

double percent(int64_t a, int64_t b) { return b ? 100.0 * double(a) / double(b) : 0; }

std::string parenthesised(const std::string& s) { return s.empty() ? s : " (" + s + ")"; }

}  // namespace

std::string format_summary(const CacheConfig& c, const CacheSizes& z, const CacheSummary& s) {
  std::string out;
  out += fmt::format("  granularity  hash {} tokens, allocation {} tokens; checkpoints '{}'{}; eviction '{}'\n",
                     c.hash_block_tokens, c.allocation_block_tokens, c.checkpoint,
                     parenthesised(make_checkpoint_policy(c)->describe()), c.eviction);
  out += fmt::format("  sizes        KV {:.0f} B/token; state checkpoint {} ({:.0f} tokens of KV){}\n",
                     z.kv_bytes_per_token, bytes_text(z.state_bytes), z.state_bytes / z.kv_bytes_per_token,
                     z.needs_state ? "" : "; hits need no state");
  std::string tiers;
  for (const Tier& t : c.tiers) {
    tiers += fmt::format("{}{} {}", tiers.empty() ? "" : ", ", t.name, bytes_text(t.capacity_bytes));
    if (t.read_bytes_per_s > 0) tiers += fmt::format(" at {:.0f} GB/s", t.read_bytes_per_s / 1e9);
  }
  out += fmt::format("  tiers        {} ({}{})\n\n", tiers,
                     c.nodes == 1 ? std::string("one node")
                                  : fmt::format("{} nodes, {}", c.nodes,
                                                c.pooled ? "pooled"
                                                         : (c.routing == Routing::session ? "per node, session affinity"
                                                                                          : "per node, round robin")),
                     "");
  out += fmt::format("  requests               {:>12}   ({} input, {} output tokens)\n", s.requests, s.input_tokens,
                     s.output_tokens);
  out +=
      fmt::format("  token hit rate         {:>11.2f}%   ({} tokens reused)\n", 100 * s.token_hit_rate(), s.hit_tokens);
  out += fmt::format("  KV hit rate            {:>11.2f}%   (KV cached, state or not)\n", 100 * s.kv_hit_rate());
  out += fmt::format("  recomputed             {:>12}   tokens whose KV was cached but not the state at their end\n",
                     s.recomputed_tokens);
  out += fmt::format("  requests with a hit    {:>12}   ({:.1f}%)\n", s.requests_with_hit,
                     percent(s.requests_with_hit, s.requests));
  out += fmt::format(
      "  KV hit, state miss     {:>12}   requests with cached KV and no usable state (hit 0); {} more "
      "hit short of their KV\n",
      s.requests_kv_hit_state_miss, s.requests_state_shortened);
  if (s.sessions_multi_turn > 0) {
    out +=
        fmt::format("  never resumed          {:>12}   of {} multi-turn sessions (later turns matched KV, never hit)\n",
                    s.sessions_never_resumed, s.sessions_multi_turn);
  }
  out += fmt::format("  checkpoints written    {:>12}\n", s.checkpoints_written);
  if (s.loaded_bytes > 0) {
    out += fmt::format("  loaded from lower tiers {:>11}   in {:.1f} ms\n", bytes_text(s.loaded_bytes), s.load_ms);
  }
  out += fmt::format("  cost                   {:>12.4f} $   ({:.6f} $ per request, {:.4f} $ per M input tokens)\n",
                     s.cost_usd, s.cost_per_request_usd(), s.cost_per_million_input_tokens_usd());
  if (s.has_prefill_time) {
    out += fmt::format("  prefill time           {:>12.1f} s without cache, {:.1f} s with it: {:.1f}% saved\n",
                       s.prefill_ms_without_cache / 1e3, s.prefill_ms_with_cache / 1e3,
                       s.prefill_ms_without_cache > 0 ? 100 * s.prefill_ms_saved() / s.prefill_ms_without_cache : 0);
  }
  return out;
}

std::string format_curve(const std::vector<CurvePoint>& curve) {
  std::string out = fmt::format("  {:>16} {:>12} {:>14} {:>14} {:>16}\n", "capacity tokens", "bytes", "hit rate",
                                "KV-only rate", "recomputed");
  for (const CurvePoint& p : curve) {
    out += fmt::format("  {:>16.3g} {:>12} {:>13.2f}% {:>13.2f}% {:>16}\n", p.capacity_tokens,
                       bytes_text(p.capacity_bytes), 100 * p.token_hit_rate, 100 * p.kv_only_hit_rate,
                       p.recomputed_tokens);
  }
  return out;
}

}  // namespace k3::cache
