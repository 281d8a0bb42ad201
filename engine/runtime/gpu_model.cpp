#include "engine/runtime/gpu_model.h"

#include "core/error.h"
#include "engine/runtime/cuda_check.h"
#include "engine/runtime/dense_mlp.h"
#include "engine/runtime/kda_layer.h"
#include "engine/runtime/mla_layer.h"
#include "engine/runtime/moe_layer.h"
#include "kernels/attnres_mix.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/rmsnorm.h"
#include "kernels/sampling.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <string_view>

namespace k3::runtime {

namespace {
constexpr int kMaxBlocks = 9;  // AttnRes: 8 stored blocks + the partial sum
}  // namespace

// The pass structure's buffers, sized for T = max(max_chunk_tokens, max_batch) tokens, and each part's own.
struct GpuModel::Workspace {
  int64_t T = 0;                   // tokens per call
  int32_t* token_ids = nullptr;    // [T]
  int32_t* next_tokens = nullptr;  // [max_batch]
  int32_t* iota = nullptr;         // [max(T·top_k, max_batch)]: 0, 1, 2, …
  int* embed_error = nullptr;      // [1]
  bf16* pool[kMaxBlocks] = {};     // AttnRes blocks and the partial sum (plain residuals: pool[0]), [T, h] each
  bf16 *mix = nullptr, *normed = nullptr, *sub_out = nullptr;  // [T, h]
  KdaWorkspace kda;
  MlaWorkspace mla;
  GluScratch glu;
  MoeWorkspace moe;
  float* logits = nullptr;  // [max_batch, V]
  // tp > 1: the rank's vocabulary rows of the logits [max_batch, V / tp] and the group's, gathered [tp, max_batch, V /
  // tp]
  float *logits_local = nullptr, *logits_gathered = nullptr;

  int64_t iota_count(const ModelConfig& c, const ModelRunShape& s) const {
    return std::max<int64_t>(T * std::max(c.moe ? c.moe->top_k : 1, 1), s.max_batch);
  }

  void lay_out(const ModelConfig& c, const parallel::RankShape& rank, const ModelRunShape& s, DeviceArena& a) {
    const int64_t h = c.hidden_size;
    T = std::max<int64_t>(s.max_chunk_tokens, s.max_batch);
    token_ids = a.take_n<int32_t>(T);
    next_tokens = a.take_n<int32_t>(s.max_batch);
    iota = a.take_n<int32_t>(iota_count(c, s));
    embed_error = a.take_n<int>(1);
    for (bf16*& p : pool) p = a.take_n<bf16>(T * h);
    mix = a.take_n<bf16>(T * h);
    normed = a.take_n<bf16>(T * h);
    sub_out = a.take_n<bf16>(T * h);
    if (c.kda) kda.lay_out(c, s, T, a);
    if (c.count_layers(AttentionKind::mla) > 0) mla.lay_out(c, s, T, a);
    glu.lay_out(c, T, c.moe ? MoeWorkspace::expert_slots(c, rank, T) : 0, a);
    if (c.moe) moe.lay_out(c, rank, T, a);
    logits = a.take_n<float>(int64_t(s.max_batch) * c.vocab_size);
    if (rank.tp() > 1) {
      logits_local = a.take_n<float>(int64_t(s.max_batch) * rank.vocab_rows);
      logits_gathered = a.take_n<float>(int64_t(s.max_batch) * rank.vocab_rows * rank.tp());
    }
  }
};

struct GpuModel::Parts {
  KdaLayer kda;
  MlaLayer mla;
  DenseMlp dense;
  MoeLayer moe;
};

// Block AttnRes: the stored blocks pool[0 .. blocks) and whether pool[blocks] holds the partial sum p.
struct GpuModel::ResidualStream {
  int blocks = 0;
  bool have_partial = true;
};

uint64_t GpuModel::workspace_bytes(const ModelConfig& config, const ModelRunShape& shape) {
  return workspace_bytes(config, parallel::rank_shape(config, parallel::rank_layout({}, 0, config.num_layers)), shape);
}

uint64_t GpuModel::workspace_bytes(const ModelConfig& config, const parallel::RankShape& rank,
                                   const ModelRunShape& shape) {
  Workspace w;
  DeviceArena measuring = DeviceArena::measuring();
  w.lay_out(config, rank, shape, measuring);
  return measuring.used_bytes() + (32ull << 20);  // + the GEMM runner's workspace
}

bool GpuModel::dequantized_experts(const ModelConfig& config, int64_t tokens) {
  return MoeLayer::dequantized_experts(config, tokens);
}

bool GpuModel::decode_capturable(const ModelConfig& config) {
  return !(config.moe && config.count_layers(MlpKind::moe) > 0 && config.routed_expert_format != StorageFormat::mxfp4);
}

GpuModel::GpuModel(const DeviceWeights& weights, GpuCache& cache, const ModelRunShape& shape, RankComms comms)
    : weights_(weights), config_(weights.config()), cache_(cache), shape_(shape), arena_(DeviceArena::measuring()) {
  const parallel::RankShape& rank = weights.rank();
  K3_CHECK(rank.tp() == 1 || comms.tp != nullptr, "a rank of tp {} needs its attention group's communicator",
           rank.tp());
  K3_CHECK(rank.ep() == 1 || (comms.ep != nullptr && config_.moe && config_.moe->latent_dim > 0),
           "a rank of ep {} needs its expert group's communicator and latent MoE layers (K3)", rank.ep());
  K3_CHECK(shape.max_batch <= cache.shape().max_sequences, "decode batch {} exceeds the cache's {} sequence slots",
           shape.max_batch, cache.shape().max_sequences);
  K3_CHECK(
      shape.page_tokens == cache.shape().page_tokens && shape.max_context_tokens == cache.shape().max_context_tokens,
      "the run shape's page size and context must be the cache's");
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  gemm_ = std::make_unique<GemmRunner>();
  ws_ = std::make_unique<Workspace>();
  {
    Workspace measuring_ws;
    DeviceArena measuring = DeviceArena::measuring();
    measuring_ws.lay_out(config_, rank, shape_, measuring);
    arena_ = DeviceArena(measuring.used_bytes(), "the activation workspace");
  }
  ws_->lay_out(config_, rank, shape_, arena_);
  context_ = std::make_unique<ForwardContext>(ForwardContext{weights_, config_, cache_, stream_, *gemm_, comms});
  parts_ =
      std::make_unique<Parts>(Parts{KdaLayer(*context_, ws_->kda), MlaLayer(*context_, ws_->mla, ws_->iota),
                                    DenseMlp(*context_, ws_->glu), MoeLayer(*context_, ws_->moe, ws_->glu, ws_->iota)});
  std::vector<int32_t> iota(ws_->iota_count(config_, shape_));
  std::iota(iota.begin(), iota.end(), 0);
  CUDA_CHECK(cudaMemcpy(ws_->iota, iota.data(), iota.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(ws_->next_tokens, 0, sizeof(int32_t) * shape_.max_batch));
  CUDA_CHECK(cudaMemset(ws_->embed_error, 0, sizeof(int)));
}

GpuModel::~GpuModel() {
  if (decode_graph_) cudaGraphExecDestroy(decode_graph_);
  if (stream_) cudaStreamDestroy(stream_);
}

int32_t* GpuModel::next_tokens() const { return ws_->next_tokens; }
float* GpuModel::logits() const { return ws_->logits; }

void GpuModel::tap(const char* what, int layer, const bf16* device, int64_t rows) const {
  if (tap_) {
    if (tap_synchronizes_) CUDA_CHECK(cudaStreamSynchronize(stream_));
    tap_(what, layer, device, rows, config_.hidden_size);
  }
}

void GpuModel::prefill(int sequence, const std::vector<int32_t>& tokens, int64_t start) {
  K3_CHECK(!tokens.empty(), "prefill of sequence slot {} with no tokens", sequence);
  const int64_t end = start + int64_t(tokens.size());
  if (end > cache_.admitted_tokens(sequence)) {
    throw Error(fmt::format("sequence slot {}: prefill to {} tokens, {} admitted", sequence, end,
                            cache_.admitted_tokens(sequence)));
  }
  if (config_.count_layers(AttentionKind::mla) > 0 && end > shape_.max_prefill_context) {
    throw Error(fmt::format("prefill to {} tokens exceeds the workspace's {} (max_prefill_context)", end,
                            shape_.max_prefill_context));
  }
  for (int64_t done = 0; done < int64_t(tokens.size()); done += shape_.max_chunk_tokens) {
    const int64_t n = std::min<int64_t>(shape_.max_chunk_tokens, int64_t(tokens.size()) - done);
    CUDA_CHECK(
        cudaMemcpyAsync(ws_->token_ids, tokens.data() + done, n * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
    ForwardPass pass;
    pass.tokens = n;
    pass.sequence = sequence;
    pass.start = start + done;
    pass.logits = done + n == int64_t(tokens.size());
    forward(pass);
  }
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  int embed_error = 0;
  CUDA_CHECK(cudaMemcpy(&embed_error, ws_->embed_error, sizeof(int), cudaMemcpyDeviceToHost));
  if (embed_error)
    throw InputError(fmt::format("a prompt token is outside the vocabulary of {} tokens", config_.vocab_size));
}

void GpuModel::begin_decode(const std::vector<int64_t>& cached_tokens) {
  const int batch = int(cached_tokens.size());
  K3_CHECK(batch >= 1 && batch <= shape_.max_batch, "decode batch {} outside [1, {}]", batch, shape_.max_batch);
  std::vector<int32_t> positions(2 * batch);
  for (int b = 0; b < batch; ++b) {
    positions[b] = int32_t(cached_tokens[b]);
    positions[batch + b] = int32_t(cached_tokens[b] + 1);
  }
  CUDA_CHECK(cudaMemcpyAsync(cache_.step_positions(), positions.data(), positions.size() * sizeof(int32_t),
                             cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void GpuModel::decode_step(int batch) {
  K3_CHECK(batch >= 1 && batch <= shape_.max_batch, "decode batch {} outside [1, {}]", batch, shape_.max_batch);
  // This step's tokens are the previous step's samples.
  CUDA_CHECK(
      cudaMemcpyAsync(ws_->token_ids, ws_->next_tokens, batch * sizeof(int32_t), cudaMemcpyDeviceToDevice, stream_));
  ForwardPass pass;
  pass.tokens = batch;
  pass.decode = true;
  forward(pass);  // ends with decode.advance
}

void GpuModel::capture_decode(int batch) {
  K3_CHECK(!tap_, "a tapped forward cannot be captured");
  if (!decode_capturable(config_)) {
    throw InputError(
        fmt::format("{}: its decode step cannot be captured as a CUDA graph: the MoE layers' {} routed "
                    "experts run one GEMM per active expert, sized from expert offsets copied to the "
                    "host (one sync per MoE layer); decode it eagerly (k3perf run --eager)",
                    config_.name, to_string(config_.routed_expert_format)));
  }
  if (decode_graph_) {
    CUDA_CHECK(cudaGraphExecDestroy(decode_graph_));
    decode_graph_ = nullptr;
  }
  cudaGraph_t graph;
  CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  try {
    decode_step(batch);
  } catch (...) {
    cudaStreamEndCapture(stream_, &graph);
    throw;
  }
  CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&decode_graph_, graph, 0));
  CUDA_CHECK(cudaGraphDestroy(graph));
  captured_batch_ = batch;
}

void GpuModel::launch_decode() {
  K3_CHECK(decode_graph_ != nullptr, "no decode step was captured");
  CUDA_CHECK(cudaGraphLaunch(decode_graph_, stream_));
}

// The schedule, op by op. A sublayer (its run of KDA/MLA or MLP/MoE ops) reads w.normed and is tapped before its
// first op and after its last ("attention_in" … "attention_out"); a tapped forward never folds the residual add,
// so the tap sees f(x).
void GpuModel::forward(const ForwardPass& pass) {
  const std::vector<OpRef> schedule = forward_schedule(config_, pass, bool(tap_), weights_.rank().layout.parallelism);
  auto sublayer_at = [&](std::size_t i, int layer) -> std::optional<Sublayer> {
    if (i >= schedule.size() || schedule[i].layer != layer) return std::nullopt;
    return sublayer_of(schedule[i].id);
  };
  ResidualStream residual;
  for (std::size_t i = 0; i < schedule.size(); ++i) {
    const OpRef& op = schedule[i];
    const std::optional<Sublayer> sublayer = sublayer_of(op.id);
    const bool attention = sublayer == Sublayer::attention;
    if (sublayer && (i == 0 || sublayer_at(i - 1, op.layer) != sublayer)) {
      tap(attention ? "attention_in" : "mlp_in", op.layer, ws_->normed, pass.tokens);
    }
    run(pass, op, residual);
    if (sublayer && sublayer_at(i + 1, op.layer) != sublayer) {
      tap(attention ? "attention_out" : "mlp_out", op.layer, sublayer_io(op.layer, *sublayer).out, pass.tokens);
    }
    if (op.id == OpId::head_attnres || op.id == OpId::head_norm) tap("final_hidden", -1, ws_->normed, pass.tokens);
  }
}

SublayerIo GpuModel::sublayer_io(int layer, Sublayer sublayer) const {
  const bool fold = folds_residual(config_, layer, sublayer, bool(tap_), weights_.rank().tp() > 1);
  return SublayerIo{ws_->normed, fold ? ws_->pool[0] : ws_->sub_out, fold};
}

void GpuModel::mixer(const AttnResDeviceWeights& mix, const bf16* norm, int blocks, int64_t T, const char* what) {
  const ModelConfig& c = config_;
  Workspace& w = *ws_;
  const int64_t h = c.hidden_size;
  kernels::AttnResCandidates cand;
  cand.count = blocks + 1;
  for (int i = 0; i <= blocks; ++i) {
    cand.rows[i] = w.pool[i];
    cand.row_stride[i] = h;
  }
  check(kernels::attnres_mix_rmsnorm_bf16(cand, mix.query, mix.key_norm, float(c.rms_norm_eps), norm,
                                          float(c.rms_norm_eps), w.mix, h, w.normed, h, T, h, stream_),
        what);
}

void GpuModel::run(const ForwardPass& pass, const OpRef& op, ResidualStream& residual) {
  const ModelConfig& c = config_;
  Workspace& w = *ws_;
  const int64_t T = pass.tokens, h = c.hidden_size;
  const int l = op.layer;
  const parallel::RankShape& rank = weights_.rank();
  // A collective opens its own range (engine/parallel/communicator.h); what its rows need is computed in the ops
  // around it.
  std::optional<OpRange> range;
  if (op_info(op.id).kind != OpKind::collective) range.emplace(op);
  if (const std::optional<Sublayer> sublayer = sublayer_of(op.id)) {
    const SublayerIo io = sublayer_io(l, *sublayer);
    const std::string_view name = op_info(op.id).suffix;  // "<module>.<op>": the module picks the part
    if (name.starts_with("kda.")) {
      parts_->kda.run(op.id, pass, l, io);
    } else if (name.starts_with("mla.")) {
      parts_->mla.run(op.id, pass, l, io);
    } else if (name.starts_with("moe.")) {
      parts_->moe.run(op.id, pass, l, io);
    } else {
      parts_->dense.run(op.id, pass, l, io);
    }
    return;
  }
  switch (op.id) {
    case OpId::embed_lookup:  // the rank's vocabulary rows (all of them on one GPU)
      check(kernels::embedding_gather_rows_bf16(weights_.embed, h, c.vocab_size, rank.first_vocab_row, rank.vocab_rows,
                                                w.token_ids, T, w.pool[0], h, h, w.embed_error, stream_),
            "embedding");
      return;
    case OpId::embed_all_reduce:
      context_->comms.tp->all_reduce(op, w.pool[0], T * h, weights::TensorDtype::bf16, stream_);
      return;
    case OpId::attn_all_reduce:
    case OpId::mlp_all_reduce: {
      const SublayerIo io = sublayer_io(l, op.id == OpId::attn_all_reduce ? Sublayer::attention : Sublayer::mlp);
      context_->comms.tp->all_reduce(op, io.out, T * h, weights::TensorDtype::bf16, stream_);
      return;
    }
    case OpId::attnres_pre_attn:
      mixer(weights_.layers[l].attn_res, weights_.layers[l].input_norm, residual.blocks, T, "AttnRes mixer");
      if (l % c.attn_res_block_layers == 0) {  // close a block: p becomes blocks[n]
        K3_CHECK(residual.blocks + 1 < kMaxBlocks, "more than {} AttnRes blocks", kMaxBlocks - 1);
        ++residual.blocks;
        residual.have_partial = false;
      }
      return;
    case OpId::attnres_pre_mlp:
      mixer(weights_.layers[l].mlp_res, weights_.layers[l].post_norm, residual.blocks, T, "AttnRes mixer");
      return;
    case OpId::norm_attn_in:
    case OpId::norm_mlp_in: {
      const bf16* weight = op.id == OpId::norm_attn_in ? weights_.layers[l].input_norm : weights_.layers[l].post_norm;
      check(kernels::rmsnorm_bf16(w.pool[0], h, weight, float(c.rms_norm_eps), w.normed, h, T, h, stream_), "RMSNorm");
      return;
    }
    case OpId::attn_residual:
    case OpId::mlp_residual:
      if (c.residual == ResidualKind::plain) {  // x ← x + f(x)
        check(kernels::add_bf16(w.pool[0], w.sub_out, w.pool[0], T * h, stream_), "residual add");
      } else if (residual.have_partial) {  // p ← p + f(x)
        check(kernels::add_bf16(w.pool[residual.blocks], w.sub_out, w.pool[residual.blocks], T * h, stream_),
              "residual add");
      } else {  // the block was just closed: p ← f(x)
        // (Folding this add into the sublayer's last GEMM, as plain residuals do, gave wrong logits from the
        // second decode step on in the K3 twin's untapped test on an H200; not found yet, so not folded here.)
        CUDA_CHECK(cudaMemcpyAsync(w.pool[residual.blocks], w.sub_out, T * h * sizeof(bf16), cudaMemcpyDeviceToDevice,
                                   stream_));
        residual.have_partial = true;
      }
      return;
    case OpId::head_attnres:
    case OpId::head_norm:
    case OpId::head_lm_head:
    case OpId::head_all_gather:
    case OpId::head_sample: head(pass, op.id, residual.blocks); return;
    case OpId::decode_advance:
      check(kernels::increment_i32(cache_.step_positions(), int(2 * T), stream_), "advance positions");
      return;
    default: throw Error(fmt::format("the engine has no code for op {}", op.name()));
  }
}

void GpuModel::head(const ForwardPass& pass, OpId op, int blocks) {
  const ModelConfig& c = config_;
  Workspace& w = *ws_;
  const parallel::RankShape& rank = weights_.rank();
  const int64_t T = pass.tokens, h = c.hidden_size, V = c.vocab_size;
  const bool tp = rank.tp() > 1;
  const int64_t Vr = rank.vocab_rows;        // the rank's rows of lm_head (V on one GPU)
  const int64_t rows = pass.decode ? T : 1;  // decode: every row's logits; prefill: the chunk's last token's
  const bf16* last = pass.decode ? w.normed : w.normed + (T - 1) * h;
  float* row = pass.decode ? w.logits : w.logits + int64_t(pass.sequence) * V;  // the full logits, [rows, V]
  switch (op) {
    case OpId::head_norm:
      check(kernels::rmsnorm_bf16(w.pool[0], h, weights_.final_norm, float(c.rms_norm_eps), w.normed, h, T, h, stream_),
            "final RMSNorm");
      return;
    case OpId::head_attnres: mixer(weights_.final_res, weights_.final_norm, blocks, T, "final AttnRes mixer"); return;
    case OpId::head_lm_head:
      context_->gemm_f32(last, h, weights_.lm_head, tp ? w.logits_local : row, Vr, rows, Vr, h);
      return;
    case OpId::head_all_gather:
      context_->comms.tp->all_gather({-1, op}, w.logits_local, w.logits_gathered, rows * Vr, weights::TensorDtype::f32,
                                     stream_);
      return;
    case OpId::head_sample:
      if (tp) {  // [tp, rows, V / tp] gathered → [rows, V]: rank r's block into columns [r·V/tp, (r+1)·V/tp)
        for (int r = 0; r < rank.tp(); ++r) {
          CUDA_CHECK(cudaMemcpy2DAsync(row + r * Vr, V * sizeof(float), w.logits_gathered + r * rows * Vr,
                                       Vr * sizeof(float), Vr * sizeof(float), rows, cudaMemcpyDeviceToDevice,
                                       stream_));
        }
      }
      check(kernels::sample_greedy(row, int(rows), int(V), pass.decode ? w.next_tokens : w.next_tokens + pass.sequence,
                                   stream_),
            "sampling");
      return;
    default: throw Error(fmt::format("{} is no head op", op_name(op, -1)));
  }
}

}  // namespace k3::runtime
