// A question to the simulator: which model, on which hardware, split how, at which precision,
// doing what (phase and workload), with which counterfactual overrides. Loaded from YAML
// (docs/scenarios.md); `--set key=value` edits the YAML tree before it is read.
#pragma once

#include "core/data_paths.h"
#include "core/dtype.h"
#include "core/hardware.h"
#include "core/model_config.h"

#include <string>
#include <utility>
#include <vector>

namespace k3 {

// How the GPUs of one model replica split the work (per pipeline stage: tp * attention_dp GPUs).
//   tp            tensor parallel size of attention, dense MLP, shared expert, lm_head
//   attention_dp  data-parallel attention groups; each holds its own sequences and KV
//   ep            expert parallel size; routed experts are split over ep GPUs and, within an
//                 expert, over moe_tp() = tp * attention_dp / ep GPUs
//   pp            pipeline stages (layers split evenly)
//   sequence_parallel  the residual stream (AttnRes block bank, mixers, norms) is split over the tp
//                 ranks by token: each TP all-reduce becomes a reduce-scatter, and an all-gather
//                 feeds the attention and MLP inputs (docs/comm.md)
struct Parallelism {
  int tp = 1;
  int attention_dp = 1;
  int ep = 1;
  int pp = 1;
  bool sequence_parallel = false;
  int stage_gpus() const { return tp * attention_dp; }
  int gpus() const { return stage_gpus() * pp; }
  int moe_tp() const { return stage_gpus() / ep; }
};

// Storage and compute choices. Defaults follow the checkpoint (see Scenario loading).
struct Precision {
  StorageFormat weights = StorageFormat::bf16;         // non-expert linear layers
  StorageFormat routed_experts = StorageFormat::bf16;  // routed expert weights
  StorageFormat kv_cache = StorageFormat::bf16;        // MLA latent cache: bf16 or fp8
  StorageFormat kda_state = StorageFormat::fp32;       // KDA recurrent state: fp32 or bf16
  StorageFormat kda_conv_state = StorageFormat::bf16;  // short-conv cache (model dtype)
  StorageFormat activations = StorageFormat::bf16;     // activation tensors between ops
  ComputeType gemm_compute = ComputeType::bf16;        // tensor-core type of the GEMMs
  // Bytes per cached token per MLA layer: one value per latent/rope entry, plus one fp32 scale
  // per token when the cache is fp8.
  double kv_bytes_per_value() const;
  double kv_scale_bytes_per_token() const;
};

enum class PhaseKind { prefill, decode, verify };
std::string to_string(PhaseKind p);

// What one step does. Per sequence: `context_tokens` already cached, `new_tokens` processed now
// (decode 1; verify draft_tokens + 1; prefill the prompt, in chunks of prefill_chunk_tokens).
struct Phase {
  PhaseKind kind = PhaseKind::decode;
  long long batch = 1;           // sequences in the step, over all attention-DP groups
  long long context_tokens = 0;  // cached tokens per sequence before the step
  long long new_tokens = 1;      // tokens per sequence processed in the step
  long long prefill_chunk_tokens = 16384;

  static Phase decode(long long batch, long long context_tokens);
  static Phase prefill(long long batch, long long prompt_tokens, long long cached_prefix_tokens,
                       long long chunk_tokens = 16384);
  static Phase verify(long long batch, long long draft_tokens, long long context_tokens);
};

struct Runtime {
  bool cuda_graphs = true;                     // kernels replayed from CUDA graphs (per-kernel overhead term)
  double memory_utilization = 0.90;            // fraction of HBM the engine may use
  double reserved_bytes = 2.0 * (1ull << 30);  // CUDA context, library workspaces, NCCL buffers
};

struct Scenario {
  std::string name;
  std::string source;  // file or "<embedded default>"
  ModelConfig model;
  Hardware hardware;
  Parallelism parallelism;
  Precision precision;
  Phase phase;
  Runtime runtime;
  std::vector<std::string> overrides;  // counterfactuals applied, for the report
};

// `sets` are "key.path=value" edits applied to the YAML before reading, e.g. "workload.batch=64".
Scenario load_scenario(const std::string& path, const DataPaths& data, const std::vector<std::string>& sets = {});
Scenario parse_scenario(const std::string& yaml_text, const std::string& origin, const DataPaths& data,
                        const std::vector<std::string>& sets = {});

// Checks the combination (GPU count vs parallelism, heads divisible by tp, ...). Throws InputError.
void validate(const Scenario& s);

}  // namespace k3
