#include "core/limits.h"

#include <array>
#include <cmath>

namespace k3 {

std::span<const IntLimit* const> int_limits() {
  static constexpr std::array all = {
      &limit::layers,       &limit::dense_layers, &limit::heads,          &limit::head_dim,  &limit::model_dim,
      &limit::vocab,        &limit::experts,      &limit::shared_experts, &limit::positions, &limit::parallel_degree,
      &limit::gpus,         &limit::batch,        &limit::tokens,         &limit::requests,  &limit::replicas,
      &limit::draft_tokens, &limit::seed,         &limit::op_kernels};
  return all;
}

std::span<const SizeLimit* const> size_limits() {
  static constexpr std::array all = {&limit::nesting,         &limit::header_nesting, &limit::header_bytes,
                                     &limit::inflation_floor, &limit::inflation,      &limit::trace_base_time,
                                     &limit::quoted_value,    &limit::queue_samples,  &limit::queue_sample_interval,
                                     &limit::input_memory,    &limit::shard_size};
  return all;
}

std::string limits_table() {
  std::string out = "| What | Accepted | Applies to |\n|---|---|---|\n";
  for (const IntLimit* l : int_limits()) {
    out += fmt::format("| {} | {}..{} | {} |\n", l->what, l->min, l->max, l->applies_to);
  }
  for (const SizeLimit* l : size_limits()) {
    const bool whole = l->value == std::floor(l->value);
    out += fmt::format("| {} | {} {} | {} |\n", l->what,
                       whole ? fmt::format("{:.0f}", l->value) : fmt::format("{:g}", l->value), l->unit, l->applies_to);
  }
  return out;
}

std::string exceeds(long long value, const IntLimit& limit) {
  return fmt::format("{} exceeds {}, the limit on {}", value, limit.max, limit.what);
}

std::string quoted_excerpt(std::string_view text) {
  const auto most = static_cast<std::size_t>(limit::quoted_value.value);
  if (text.size() <= most) return std::string(text);
  return fmt::format("{}... ({} characters)", text.substr(0, most - 3), text.size());
}

}  // namespace k3
