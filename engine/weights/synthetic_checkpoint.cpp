#include "engine/weights/synthetic_checkpoint.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "engine/weights/mx_format.h"
#include "engine/weights/safetensors_writer.h"
#include "engine/weights/tensor_layout.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <numbers>
#include <thread>

namespace k3::weights {

uint16_t float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);  // keep it a (quiet) NaN
  const uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);                     // ties to even
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

std::string slice_config_json(const std::string& json_text, const std::string& origin, int layers) {
  nlohmann::json root = parse_json(json_text, origin);
  nlohmann::json& t = root.contains("text_config") ? root["text_config"] : root;
  if (!t.contains("linear_attn_config") || !t.contains("num_hidden_layers")) {
    throw InputError(
        fmt::format("{}: make-checkpoint needs a kimi_linear-family config (with linear_attn_config)", origin));
  }
  const int total = t["num_hidden_layers"].get<int>();
  if (layers == 0) return json_text;
  if (layers < 0 || layers > total) {
    throw InputError(fmt::format("{}: --layers {} is outside 1..{}", origin, layers, total));
  }
  t["num_hidden_layers"] = layers;
  for (const char* key : {"kda_layers", "full_attn_layers"}) {
    nlohmann::json kept = nlohmann::json::array();
    for (const auto& l : t["linear_attn_config"][key]) {
      if (l.get<int>() <= layers) kept.push_back(l);
    }
    t["linear_attn_config"][key] = kept;
  }
  return root.dump(2) + "\n";
}

namespace {

// SplitMix64: a small, well-mixed generator whose output is the same on every platform.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  double normal() {  // Marsaglia's polar method: two values per accepted pair, no trigonometry
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u, v, s;
    do {
      u = 2.0 * uniform() - 1.0;
      v = 2.0 * uniform() - 1.0;
      s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    const double f = std::sqrt(-2.0 * std::log(s) / s);
    spare_ = v * f;
    has_spare_ = true;
    return u * f;
  }

 private:
  uint64_t state_;
  double spare_ = 0;
  bool has_spare_ = false;
};

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Fills one row of `spec` with its synthetic values.
void fill_row(const TensorSpec& spec, const ModelConfig& m, int64_t row, Random& rng, std::vector<float>& out) {
  const int64_t n = static_cast<int64_t>(out.size());
  auto normal = [&](double stddev) {
    for (float& v : out) v = float(stddev * rng.normal());
  };
  switch (spec.role) {
    case TensorRole::embedding: normal(1.0); break;
    case TensorRole::norm:
      for (float& v : out) v = float(1.0 + 0.1 * rng.normal());
      break;
    case TensorRole::attnres_query: normal(1.0 / std::sqrt(double(m.hidden_size))); break;
    case TensorRole::conv: normal(1.0 / std::sqrt(double(spec.fan_in))); break;
    case TensorRole::a_log:
      for (int64_t i = 0; i < n; ++i) {
        const int64_t index = row * n + i;  // one value per head; K3 pads with zeros
        out[i] = index < m.kda->num_heads ? float(std::log(1.0 + 15.0 * rng.uniform())) : 0.0f;
      }
      break;
    case TensorRole::dt_bias:
      for (float& v : out) v = float(2.0 * rng.uniform() - 1.0);
      break;
    case TensorRole::router_bias: normal(0.01); break;
    default: normal(1.0 / std::sqrt(double(spec.fan_in > 0 ? spec.fan_in : n))); break;
  }
}

// Row count and row width of a tensor as generated (logical, i.e. unpacked for MXFP4).
std::pair<int64_t, int64_t> rows_and_width(const TensorSpec& t) {
  if (t.role == TensorRole::expert_packed || t.role == TensorRole::expert_scale) return {t.shape[0], t.fan_in};
  if (t.shape.empty()) return {1, 1};
  int64_t width = t.shape.back(), rows = 1;
  for (size_t i = 0; i + 1 < t.shape.size(); ++i) rows *= t.shape[i];
  if (t.role == TensorRole::conv) width = t.shape[0] * t.shape[2], rows = 1;  // [P, 1, K] as one row
  if (t.role == TensorRole::a_log) width = rows * width, rows = 1;
  return {rows, width};
}

// One tensor's bytes, generated row by row; `sink` receives each row's bytes. An MXFP4 expert
// matrix also yields its block scales (1/16 of the packed size) in `scales`, for the scale tensor
// that the layout always places right after it.
template <typename Sink>
void generate_rows(const TensorSpec& t, const ModelConfig& m, uint64_t seed, std::vector<uint8_t>& scales, Sink sink) {
  const auto [rows, width] = rows_and_width(t);
  Random rng(seed ^ fnv1a(t.role == TensorRole::expert_packed ? t.name.substr(0, t.name.rfind('.')) : t.name));
  std::vector<float> values(width);
  std::vector<uint8_t> bytes, row_scales(t.role == TensorRole::expert_packed ? width / kMxBlockElements : 0);
  for (int64_t r = 0; r < rows; ++r) {
    fill_row(t, m, r, rng, values);
    switch (t.dtype) {
      case TensorDtype::f32:
        bytes.resize(width * 4);
        std::memcpy(bytes.data(), values.data(), bytes.size());
        break;
      case TensorDtype::bf16:
        bytes.resize(width * 2);
        for (int64_t i = 0; i < width; ++i) {
          const uint16_t b = float_to_bf16(values[i]);
          std::memcpy(bytes.data() + 2 * i, &b, 2);
        }
        break;
      case TensorDtype::u8:
        bytes.resize(width / 2);
        mxfp4_quantize(values.data(), width, bytes.data(), row_scales.data());
        scales.insert(scales.end(), row_scales.begin(), row_scales.end());
        break;
      default: K3_CHECK(false, "{}: no synthetic values for dtype {}", t.name, to_string(t.dtype));
    }
    sink(bytes);
  }
}

struct Generated {
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> scales;  // MXFP4 expert matrices only
};

Generated generate_whole(const TensorSpec& t, const ModelConfig& m, uint64_t seed) {
  Generated g;
  generate_rows(t, m, seed, g.scales,
                [&](const std::vector<uint8_t>& row) { g.bytes.insert(g.bytes.end(), row.begin(), row.end()); });
  return g;
}

uint64_t spec_bytes(const TensorSpec& t) {
  uint64_t n = element_size_bytes(t.dtype);
  for (int64_t d : t.shape) n *= uint64_t(d);
  return n;
}

}  // namespace

bool is_checkpoint_file(const std::string& name) {
  const bool shard = name.rfind("model", 0) == 0 && name.size() > 12 && name.ends_with(".safetensors");
  const bool temporary = name.rfind(".", 0) == 0 && name.find(".tmp.") != std::string::npos;
  return name == "config.json" || name == kSafetensorsIndexFileName || shard || temporary;
}

SyntheticCheckpointSummary write_synthetic_checkpoint(const SyntheticCheckpointOptions& o) {
  namespace fs = std::filesystem;
  const std::string sliced = slice_config_json(read_file(o.config_path), o.config_path, o.layers);
  SyntheticCheckpointSummary summary;
  summary.config = parse_model_config(sliced, o.config_path);
  const ModelConfig& m = summary.config;
  const CheckpointLayout layout = checkpoint_layout(m);

  // Shards: consecutive tensors up to shard_bytes each.
  std::vector<std::vector<const TensorSpec*>> shards(1);
  uint64_t in_shard = 0;
  for (const TensorSpec& t : layout.tensors) {
    const uint64_t b = spec_bytes(t);
    // A packed expert matrix and its scales stay in one shard (the scales are written from memory).
    if (!shards.back().empty() && in_shard + b > o.shard_bytes && t.role != TensorRole::expert_scale) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(&t);
    in_shard += b;
    summary.bytes += b;
  }
  summary.shards = static_cast<int>(shards.size());
  summary.tensors = static_cast<int64_t>(layout.tensors.size());
  summary.parameters = layout.parameters();

  // Everything is written into a fresh sibling folder and swapped in at the end: a run over an existing
  // checkpoint, interrupted or not, never leaves a mix of old and new shards.
  AtomicDirectory out(o.out_dir, is_checkpoint_file);
  const fs::path dir(out.staging());
  const auto start = std::chrono::steady_clock::now();
  std::map<std::string, std::string> shard_of;
  uint64_t written = 0, reported = 0;
  constexpr uint64_t kProgressBytes = 1'000'000'000;  // a progress line at least every GB
  constexpr uint64_t kParallelBytes = 64ull << 20;
  const size_t threads = std::max(1u, std::thread::hardware_concurrency());
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string file = fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards.size());
    SafetensorsWriter w((dir / file).string(), {{"format", "pt"}});
    for (const TensorSpec* t : shards[s]) w.declare(t->name, t->dtype, t->shape);
    // Tensors up to kParallelBytes are generated ahead on worker threads (each tensor's values come
    // from its own seed, so order does not matter); larger ones stream row by row, keeping memory
    // bounded by the window of small tensors plus one row.
    const std::vector<const TensorSpec*>& list = shards[s];
    std::deque<std::future<Generated>> window;
    size_t launched = 0;
    auto launch = [&] {
      while (launched < list.size() && window.size() < threads) {
        const TensorSpec* t = list[launched];
        if (t->role == TensorRole::expert_scale || spec_bytes(*t) > kParallelBytes) break;
        window.push_back(std::async(std::launch::async, generate_whole, std::cref(*t), std::cref(m), o.seed));
        ++launched;
      }
    };
    std::vector<uint8_t> pending_scales;
    for (size_t i = 0; i < list.size(); ++i) {
      const TensorSpec* t = list[i];
      launch();
      if (t->role == TensorRole::expert_scale) {
        K3_CHECK(!pending_scales.empty(), "{}: no packed tensor came before its scales", t->name);
        w.write(t->name, pending_scales);
        pending_scales.clear();
        if (launched == i) ++launched;  // scale tensors are never launched: step over them
      } else if (i < launched) {
        Generated g = window.front().get();
        window.pop_front();
        w.write(t->name, g.bytes);
        pending_scales = std::move(g.scales);
      } else {
        generate_rows(*t, m, o.seed, pending_scales, [&](const std::vector<uint8_t>& row) { w.write(t->name, row); });
        launched = i + 1;
      }
      shard_of[t->name] = file;
      written += spec_bytes(*t);
      if (o.progress && written - reported >= kProgressBytes) {
        reported = written;
        const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        o.progress(fmt::format("{:.2f} of {:.2f} GB ({} in layer {}), {:.1f} s", written / 1e9, summary.bytes / 1e9,
                               t->name, t->layer, sec));
      }
    }
    w.finish();
    if (o.progress) {
      const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      o.progress(fmt::format("shard {}/{} written: {} tensors, {:.2f} of {:.2f} GB, {:.1f} s", s + 1, shards.size(),
                             shards[s].size(), written / 1e9, summary.bytes / 1e9, sec));
    }
  }
  write_safetensors_index((dir / kSafetensorsIndexFileName).string(), shard_of, summary.bytes);
  write_file_atomically((dir / "config.json").string(), sliced);
  out.commit();
  return summary;
}

}  // namespace k3::weights
