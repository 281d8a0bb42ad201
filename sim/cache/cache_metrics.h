// What a cache run means (docs/cache.md#outputs): token hit rate, KV-only hits that missed the
// state, tokens recomputed, loads from lower tiers, cost at hit/miss prices, prefill time saved
// (when a roofline deployment is given), conversations that never resume; and the JSON/CSV forms.
#pragma once

#include "sim/cache/cache_config.h"
#include "sim/cache/prefill_time.h"
#include "sim/cache/prefix_cache.h"
#include "sim/workload/request.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace k3::cache {

struct Prices {  // USD per million tokens
  double hit_per_mtok = 0;
  double miss_per_mtok = 0;
  double output_per_mtok = 0;
};

struct CacheSummary {
  int64_t requests = 0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t hit_tokens = 0;
  int64_t kv_matched_tokens = 0;
  int64_t recomputed_tokens = 0;  // KV cached, state missing: prefilled again
  int64_t requests_with_hit = 0;
  int64_t requests_kv_hit_state_miss = 0;  // KV matched, no usable state at all (hit 0)
  int64_t requests_state_shortened = 0;    // hit > 0 but shorter than the KV match
  int64_t checkpoints_written = 0;
  int64_t sessions_multi_turn = 0;     // sessions (session_id >= 0) with 2+ requests
  int64_t sessions_never_resumed = 0;  // ...whose later turns matched KV yet never hit
  double loaded_bytes = 0;
  double load_ms = 0;
  double cost_usd = 0;
  bool has_prefill_time = false;
  double prefill_ms_without_cache = 0;  // every prompt from scratch
  double prefill_ms_with_cache = 0;     // the uncached part after the hit, plus loads
  double token_hit_rate() const { return input_tokens ? double(hit_tokens) / input_tokens : 0; }
  double kv_hit_rate() const { return input_tokens ? double(kv_matched_tokens) / input_tokens : 0; }
  double cost_per_request_usd() const { return requests ? cost_usd / requests : 0; }
  double cost_per_million_input_tokens_usd() const { return input_tokens ? cost_usd / input_tokens * 1e6 : 0; }
  double prefill_ms_saved() const { return prefill_ms_without_cache - prefill_ms_with_cache; }
};

double request_cost_usd(const RequestOutcome& o, const Prices& prices);

// `prefill` may be null (no prefill times).
CacheSummary summarize(const std::vector<workload::Request>& requests, const std::vector<RequestOutcome>& outcomes,
                       const Prices& prices, PrefillTimeModel* prefill);

// One point of a hit-rate-vs-capacity curve: the first tier's capacity in tokens of KV.
struct CurvePoint {
  double capacity_tokens = 0;
  double capacity_bytes = 0;
  double token_hit_rate = 0;    // with state checkpoints as the config places them
  double kv_only_hit_rate = 0;  // the same bytes if a hit needed no state (a pure-attention cache)
  int64_t recomputed_tokens = 0;
};

// Runs the config at each capacity (first tier; other tiers as configured).
std::vector<CurvePoint> hit_rate_curve(const std::vector<workload::Request>& requests, const CacheConfig& config,
                                       const CacheSizes& sizes, const std::vector<double>& capacities_tokens);

nlohmann::ordered_json to_json(const CacheConfig& config, const CacheSizes& sizes, const CacheSummary& s);
nlohmann::ordered_json to_json(const std::vector<CurvePoint>& curve);
// One row per request: id, node, input, output, hit, kv_matched, recomputed, loaded bytes, load ms, cost.
std::string outcomes_csv(const std::vector<RequestOutcome>& outcomes, const Prices& prices);
std::string curve_csv(const std::vector<CurvePoint>& curve);
// The terminal table.
std::string format_summary(const CacheConfig& config, const CacheSizes& sizes, const CacheSummary& s);
std::string format_curve(const std::vector<CurvePoint>& curve);

}  // namespace k3::cache
