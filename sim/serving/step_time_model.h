// Step time of one serving iteration on one model replica, for the batch it really runs: some
// sequences decode one token each, some run a prefill chunk (continuous batching with chunked
// prefill), all through the same weights in one pass (docs/serving.md#step-time-model).
//
// Built once per deployment from the roofline op graph (core/op_graph.h, sim/roofline.h): every
// op's FLOPs and bytes are affine in a few batch features (sequences, tokens, cached tokens, causal
// query-key pairs, KDA chunk boundaries), so a handful of graphs at probe shapes give each op's
// coefficients exactly. A step then costs one pass over the op units, with identical layers merged:
//   op time  = ridge_max(FLOPs · s/FLOP, bytes · s/byte) + serial steps · step time
//              + kernels · per-kernel overhead                                             (as sim/roofline)
//   mixed    = weights read once; decode and prefill FLOPs and activation/KV/state bytes add;
//              distinct experts from all routed tokens of the step, E·(1 − (1 − k/E)^T)
// For a batch of only decode or only prefill sequences of one shape it equals time_step(build_op_graph)
// to rounding (tested); contexts that differ per sequence enter through their sum, which the op graph
// is linear in. Attention-DP groups: the busiest group (ceil(sequences / attention_dp)) sets the time.
#pragma once

#include "core/op_graph.h"
#include "core/scenario.h"

#include <cstdint>
#include <vector>

namespace k3::serving {

// What one iteration processes, summed over the replica's whole batch.
struct BatchShape {
  int64_t decode_sequences = 0;
  double decode_context_tokens = 0;  // Σ tokens cached by the decoding sequences before the step
  int64_t prefill_sequences = 0;
  double prefill_tokens = 0;           // Σ new tokens of the prefill chunks
  double prefill_cached_tokens = 0;    // Σ tokens cached by each chunk's sequence before the chunk
  double prefill_attention_pairs = 0;  // Σ n·p + n(n+1)/2: causal query-key pairs of the chunks
  double prefill_kda_chunks = 0;       // Σ ceil(n / 64): KDA chunk boundaries the chunks write
  double prefill_serial_steps = 0;     // max ceil(n / 64): the longest KDA state-pass chain (chunks run beside)

  void add_decode(double context_tokens);
  void add_prefill(double new_tokens, double cached_tokens);
  bool empty() const { return decode_sequences == 0 && prefill_sequences == 0; }
  double tokens() const { return double(decode_sequences) + prefill_tokens; }
};

class StepTimeModel {
 public:
  // Uses the scenario's model, hardware, parallelism, precision and runtime (not its phase).
  explicit StepTimeModel(const Scenario& s);

  // Not thread-safe: decode-only steps fill a memo of the context-free units (below).
  double step_us(const BatchShape& b) const;
  // Distinct op units after identical layers were merged (what a step evaluates).
  std::size_t unit_count() const { return units_.size(); }
  // Units whose decode cost has no term in the context (weights, MoE, norms, collectives, KDA state):
  // in a decode-only step their time depends on the number of sequences alone, so step_us keeps it
  // per sequence count and adds the same value in the same order (results identical to the bit).
  std::size_t context_free_unit_count() const;
  // Off: every unit is evaluated on every step (what the memo must equal; tests compare the two).
  void set_decode_memo(bool on) { memo_on_ = on; }

  // Features of each part, in the order the coefficients use.
  static constexpr int kDecodeFeatures = 3;   // 1, sequences, Σ context
  static constexpr int kPrefillFeatures = 6;  // 1, sequences, tokens, Σ cached, pairs, KDA chunks

 private:
  struct Part {
    bool present = false;
    bool chained = false;  // walks the step's longest chain (BatchShape::prefill_serial_steps)
    double kernels = 0;
    double calls = 0;
    std::vector<double> flops, bytes, weights, collective_bytes;  // coefficients per feature
  };
  struct Row {
    bool collective = false;
    bool routed_experts = false;    // weights from distinct experts, features from routed tokens
    bool separate_kernels = false;  // decode and prefill run different kernels (attention)
    double us_per_flop = 0, us_per_byte = 0, us_per_kernel = 0;  // GPU op
    double us_per_serial_step = 0;                               // GPU op with a chain (prefill KDA state pass)
    double latency_us = 0, us_per_collective_byte = 0;           // collective, when affine in its bytes
    bool affine_collective = true;       // else timed by sim/roofline at each size (a measured curve)
    Op collective_op;                    // the collective as the graph emits it, for that timing
    double weight_bytes_per_expert = 0;  // routed experts, this GPU
    Part decode, prefill;
  };
  struct OpCost {
    double compute_us = 0, memory_us = 0, overhead_us = 0, serial_us = 0, time_us = 0;
  };
  // A main row and the rows that run beside it, times how many layers share the same numbers.
  struct Unit {
    Row main;
    std::vector<Row> beside;
    double count = 1;
    bool context_free = false;  // decode cost independent of Σ context (see context_free_unit_count)
  };
  struct Features {
    double decode[kDecodeFeatures];
    double prefill[kPrefillFeatures];
    double decode_routed[kDecodeFeatures];
    double prefill_routed[kPrefillFeatures];
    double routed_tokens;  // all tokens routed to experts in the step, over the stage
    double serial_steps;   // the longest chain of the prefill chunks
    bool has_decode, has_prefill;
  };
  OpCost cost(const Row& r, const Features& f) const;
  double unit_us(const Unit& u, const Features& f) const;  // the main row with the rows beside it

  Hardware hardware_;
  Runtime runtime_;
  std::vector<Unit> units_;
  double experts_ = 0, top_k_ = 0, ep_ = 1;
  int attention_dp_ = 1;
  // Decode-only memo: unit_us of context-free unit u at D sequences is decode_memo_[D * units + u]
  // (NaN until first needed).
  mutable std::vector<double> decode_memo_;
  bool memo_on_ = true;
};

}  // namespace k3::serving
