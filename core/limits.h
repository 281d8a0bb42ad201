// The limits on every count and size read from a file or flag, stated once. docs/reliability.md lists them
// (a test checks that its table matches these constants).
//
// Integer limits are chosen so that the products the model needs stay exact: pairwise products of dims
// fit an int, and the largest parameter count (layers x experts x 3 x dim x dim) fits a long long.
//   read_int<int>(node, limit::parallel_degree)   an integer read in its own type, or an InputError
//                                                 "...: key 'parallelism.tp': 4294967296 exceeds 65536 ..."
#pragma once

#include "core/error.h"

#include <fmt/format.h>

#include <limits>
#include <span>
#include <string>
#include <string_view>

namespace k3 {

struct IntLimit {
  std::string_view what;  // what is counted, as errors say it
  long long min;
  long long max;
  std::string_view applies_to;  // the keys and flags read with it (for the table)
};

// A limit on a size or rate that is not read as one integer (nesting, bytes, samples).
struct SizeLimit {
  std::string_view what;
  double value;
  std::string_view unit;
  std::string_view applies_to;
};

namespace limit {
inline constexpr IntLimit layers{"layers", 1, 4096, "num_hidden_layers, attn_res_block_size, overrides.layers"};
inline constexpr IntLimit dense_layers{"leading dense layers", 0, 4096, "first_k_dense_replace"};
inline constexpr IntLimit heads{"attention heads", 1, 4096, "num_attention_heads, num_key_value_heads, KDA num_heads"};
inline constexpr IntLimit head_dim{"head dimension", 1, 4096, "qk_nope/qk_rope/v_head_dim, KDA head_dim, conv"};
inline constexpr IntLimit model_dim{"model dimension", 1, 131'072, "hidden, intermediate and latent sizes, ranks"};
inline constexpr IntLimit vocab{"vocabulary size", 1, 4'194'304, "vocab_size"};
inline constexpr IntLimit experts{"experts", 1, 16'384, "num_experts, num_experts_per_token"};
inline constexpr IntLimit shared_experts{"shared experts", 0, 1024, "num_shared_experts"};
inline constexpr IntLimit parallel_degree{"parallel degree", 1, 65'536, "tp, ep, attention_dp, pp"};
inline constexpr IntLimit gpus{"GPUs", 1, 1'048'576, "tp x attention_dp x pp, gpus"};
inline constexpr IntLimit batch{"sequences in a batch", 1, 1'048'576, "batch, max_sequences"};
inline constexpr IntLimit positions{"positions", 1, 1'073'741'824, "max_position_embeddings"};
inline constexpr IntLimit tokens{"tokens", 0, 1'073'741'824, "context, prompt, output and cached tokens"};
inline constexpr IntLimit requests{"requests", 1, 10'000'000, "count, limit, sample_requests"};
inline constexpr IntLimit replicas{"replicas", 1, 65'536, "replicas, prefill/decode_replicas, max_replicas"};
inline constexpr IntLimit draft_tokens{"draft tokens", 1, 64, "draft_tokens"};
inline constexpr IntLimit seed{"seed", 0, std::numeric_limits<long long>::max(), "seed"};
inline constexpr IntLimit op_kernels{"kernels of one op", 0, 1'000'000'000, "prediction and compare JSON"};

inline constexpr SizeLimit nesting{"JSON and YAML nesting", 256, "levels", "every JSON and YAML input and trace"};
inline constexpr SizeLimit header_nesting{"safetensors header nesting", 16, "levels", "safetensors headers"};
inline constexpr SizeLimit header_bytes{"safetensors header", 1e8, "bytes", "safetensors headers"};
inline constexpr SizeLimit inflation_floor{"gzip trace inflated, whatever its size", 64 * 1024 * 1024, "bytes",
                                           ".json.gz traces"};
inline constexpr SizeLimit inflation{"gzip trace inflated, beyond that", 200, "times its compressed size",
                                     ".json.gz traces"};
inline constexpr SizeLimit trace_base_time{"trace base time", 4611686018427387904.0, "ns (either sign)",
                                           "baseTimeNanoseconds"};
inline constexpr SizeLimit quoted_value{"a value quoted in an error", 200, "characters", "every error message"};
inline constexpr SizeLimit queue_samples{"serve queue samples", 1e6, "samples", "serve, plan"};
inline constexpr SizeLimit queue_sample_interval{"the serve queue sample interval", 1e-3, "ms (at least)",
                                                 "serving.queue_sample_interval_ms"};
inline constexpr SizeLimit input_memory{"memory an input may ask for", 8589934592.0, "bytes",
                                        "generated workloads, request traces"};
inline constexpr SizeLimit shard_size{"shard size", 1e6, "GB", "make-checkpoint --shard-gb"};
}  // namespace limit

// `l` with a larger lower bound (new tokens of a prefill step: tokens, but at least 1).
constexpr IntLimit at_least(IntLimit l, long long min) {
  l.min = min;
  return l;
}

// Every limit, in the order of docs/reliability.md's table.
std::span<const IntLimit* const> int_limits();
std::span<const SizeLimit* const> size_limits();
// The table of docs/reliability.md, in Markdown, from the constants above.
std::string limits_table();

// `text` cut to limit::quoted_value characters ("..." marks the cut): hostile values can be megabytes.
std::string quoted_excerpt(std::string_view text);

// "<value> exceeds <max>, the limit on <what>": the words every limit error ends with.
std::string exceeds(long long value, const IntLimit& limit);

// node.as_int() within `limit`, converted to T; otherwise node.fail() names the value and the limit.
// Node is a YamlNode or a JsonNode.
template <typename T, typename Node>
T read_int(const Node& node, const IntLimit& limit) {
  K3_CHECK(limit.max <= static_cast<long long>(std::numeric_limits<T>::max()) &&
               limit.min >= static_cast<long long>(std::numeric_limits<T>::min()),
           "the limit on {} does not fit the type it is read into", limit.what);
  const long long v = node.as_int();
  if (v < limit.min) {
    node.fail(fmt::format("expected {} integer in {}..{}, got {}", limit.min == 1 ? "a positive" : "an", limit.min,
                          limit.max, v));
  }
  if (v > limit.max) node.fail(exceeds(v, limit));
  return static_cast<T>(v);
}

}  // namespace k3
