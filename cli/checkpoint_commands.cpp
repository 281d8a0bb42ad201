// k3perf make-checkpoint, inspect and generate: thin fronts over engine/weights and engine/reference.
#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/limits.h"
#include "engine/reference/checkpoint_loader.h"
#include "engine/weights/checkpoint.h"
#include "engine/weights/safetensors_writer.h"
#include "engine/weights/synthetic_checkpoint.h"
#include "engine/weights/tensor_layout.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <map>
#include <sstream>

namespace k3::cli {

namespace fs = std::filesystem;

void add_make_checkpoint_command(CLI::App& app) {
  auto o = std::make_shared<weights::SyntheticCheckpointOptions>();
  CLI::App* cmd =
      app.add_subcommand("make-checkpoint", "Write a checkpoint in the published layout with seeded random weights");
  set_help_footer(*cmd, "k3perf make-checkpoint --config scenarios/models/k3-twin.json --seed 7 --out twin");
  cmd->add_option("--config", o->config_path, "published-form config.json (Kimi K3 or Kimi Linear family)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--layers", o->layers, "keep only the first N layers (0: all)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", o->seed, "random seed (same seed, same bytes)");
  cmd->add_option("--out", o->out_dir, "output directory")->required();
  // CLI11 writes the value when it parses, after this function has returned: it must outlive the call.
  auto shard_gb = std::make_shared<double>(4.0);
  cmd->add_option("--shard-gb", *shard_gb, "largest shard in GB (10^9 bytes)")->check(CLI::PositiveNumber);
  cmd->callback([o, shard_gb] {
    // limit::shard_size keeps the byte count inside 64 bits.
    if (*shard_gb > limit::shard_size.value) {
      throw InputError(fmt::format("--shard-gb: {} exceeds {}, the limit on {} in GB", *shard_gb,
                                   limit::shard_size.value, limit::shard_size.what));
    }
    o->shard_bytes = static_cast<uint64_t>(*shard_gb * 1e9);
    o->progress = [](const std::string& line) { fmt::print(stderr, "make-checkpoint: {}\n", line); };
    const weights::SyntheticCheckpointSummary s = weights::write_synthetic_checkpoint(*o);
    fmt::print("{}: {} layers of {}, {} tensors in {} shards, {:.3f} GB, {} parameters (seed {})\n", o->out_dir,
               s.config.num_layers, o->config_path, s.tensors, s.shards, s.bytes / 1e9, s.parameters, o->seed);
  });
}

namespace {

std::string shape_text(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// Lists a checkpoint; returns the number of problems found.
int inspect(const std::string& path) {
  int problems = 0;
  std::optional<weights::Checkpoint> ckpt;
  try {
    ckpt = weights::Checkpoint::open(path);
  } catch (const InputError& e) {
    fmt::print("problem: {}\n", e.what());
    return 1;
  }
  uint64_t bytes = 0;
  fmt::print("{:<72} {:<8} {:<20} {:>14}\n", "tensor", "dtype", "shape", "bytes");
  for (const weights::TensorInfo& t : ckpt->tensors()) {
    fmt::print("{:<72} {:<8} {:<20} {:>14}\n", t.name, weights::to_string(t.dtype), shape_text(t.shape),
               t.size_bytes());
    bytes += t.size_bytes();
  }
  fmt::print("\n{} tensors, {} bytes ({:.3f} GB)\n", ckpt->tensors().size(), bytes, bytes / 1e9);

  const fs::path dir = fs::is_directory(path) ? fs::path(path) : fs::path(path).parent_path();
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path)) {
    fmt::print("no config.json beside it: tensor layout not checked\n");
    return problems;
  }
  ModelConfig config;
  try {
    config = load_model_config(config_path.string());
  } catch (const InputError& e) {
    fmt::print("problem: {}\n", e.what());
    return problems + 1;
  }
  const weights::CheckpointLayout layout = weights::checkpoint_layout(config);
  std::map<std::string, int64_t> by_role;
  int64_t total = 0;
  for (const weights::TensorSpec& t : layout.tensors) {
    if (!ckpt->find(t.name)) continue;
    by_role[weights::to_string(t.role)] += t.parameters();
    total += t.parameters();
  }
  fmt::print("\nparameters by kind ({}):\n", config_path.string());
  for (const auto& [role, n] : by_role) fmt::print("  {:<16} {:>18}\n", role, n);
  fmt::print("  {:<16} {:>18} (the config implies {})\n", "total", total, layout.parameters());
  const weights::LayoutProblems p = weights::check_layout(layout, *ckpt);
  problems += static_cast<int>(p.missing.size() + p.unexpected.size() + p.misshaped.size());
  if (p.ok()) {
    fmt::print("\nno problems: every tensor of the {} layout is present with its shape\n", config.model_type);
  } else {
    fmt::print("\n{} problems:\n{}", problems, p.describe());
  }
  return problems;
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("inspect", "List a checkpoint's tensors, parameter counts and problems");
  set_help_footer(*cmd, "k3perf inspect twin  # the make-checkpoint example's checkpoint",
                  {{"1", "the checkpoint has problems (each one listed)"}});
  cmd->add_option("path", *path, "checkpoint directory or .safetensors file")->required();
  cmd->callback([path] {
    if (inspect(*path) > 0) throw CLI::RuntimeError(1);  // problems found: non-zero exit, report already printed
  });
}

namespace {

std::vector<int32_t> parse_tokens(const std::string& text) {
  std::istringstream in(text);
  std::vector<int32_t> out;
  std::string word;
  while (in >> word) {
    char* end = nullptr;
    const long v = std::strtol(word.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || v > INT32_MAX) {
      throw InputError(fmt::format("--prompt: '{}' is not a token id (non-negative integer)", word));
    }
    out.push_back(static_cast<int32_t>(v));
  }
  if (out.empty()) throw InputError("--prompt: no token ids given");
  return out;
}

void write_dump(const std::string& dir, const std::vector<int32_t>& prompt, const std::vector<int32_t>& generated,
                const ref::ForwardTrace& trace, const ref::Matrix& logits) {
  fs::create_directories(dir);
  std::map<std::string, std::string> meta{{"prompt", fmt::format("{}", fmt::join(prompt, " "))},
                                          {"generated", fmt::format("{}", fmt::join(generated, " "))}};
  weights::SafetensorsWriter w((fs::path(dir) / "trace.safetensors").string(), meta);
  std::vector<std::pair<std::string, const ref::Matrix*>> tensors;
  for (size_t l = 0; l < trace.attention_in.size(); ++l) {
    const std::string p = fmt::format("L{:03d}.", l + 1);
    tensors.emplace_back(p + "attention_in", &trace.attention_in[l]);
    tensors.emplace_back(p + "attention_out", &trace.attention_out[l]);
    tensors.emplace_back(p + "mlp_in", &trace.mlp_in[l]);
    tensors.emplace_back(p + "mlp_out", &trace.mlp_out[l]);
  }
  tensors.emplace_back("final_hidden", &trace.final_hidden);
  tensors.emplace_back("logits", &logits);
  for (const auto& [name, m] : tensors) w.declare(name, weights::TensorDtype::f32, {m->rows(), m->cols()});
  for (const auto& [name, m] : tensors) {
    w.write(name, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(m->data()), m->size() * sizeof(float)));
  }
  w.finish();
}

}  // namespace

void add_generate_command(CLI::App& app) {
  struct Options {
    std::string weights, prompt, backend = "cpu", dump;
    int max_new_tokens = 16;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("generate", "Run a checkpoint greedily on token ids and print the new ids");
  set_help_footer(*cmd,
                  "k3perf generate --weights twin --prompt \"1 2 3 4 5\" --max-new-tokens 8  # make-checkpoint's");
  cmd->add_option("--weights", o->weights, "checkpoint directory with config.json")->required();
  cmd->add_option("--prompt", o->prompt, "token ids, e.g. \"1 2 3\"")->required();
  cmd->add_option("--max-new-tokens", o->max_new_tokens, "tokens to generate")->check(CLI::NonNegativeNumber);
  cmd->add_option("--backend", o->backend, "where to run: cpu (the exact reference)")->check(CLI::IsMember({"cpu"}));
  cmd->add_option("--dump", o->dump, "write the prompt's per-layer activations and logits to DIR/trace.safetensors");
  cmd->callback([o] {
    const ref::LoadedModel loaded = ref::load_reference_model(o->weights);
    const std::vector<int32_t> prompt = parse_tokens(o->prompt);
    const std::vector<int32_t> generated = loaded.model.generate(prompt, o->max_new_tokens);
    fmt::print("{}\n", fmt::join(generated, " "));
    if (!o->dump.empty()) {
      ref::ModelState state = ref::ModelState::empty(loaded.config);
      ref::ForwardTrace trace;
      const ref::Matrix logits = loaded.model.forward(prompt, state, &trace);
      write_dump(o->dump, prompt, generated, trace, logits);
      fmt::print(stderr, "wrote {}\n", (fs::path(o->dump) / "trace.safetensors").string());
    }
  });
}

}  // namespace k3::cli
