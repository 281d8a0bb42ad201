#include "sim/serving/serving_report.h"

#include "core/output_header.h"

#include <fmt/format.h>

#include <algorithm>

namespace k3::serving {

namespace {

std::string deployment_line(const ServingScenario& s) {
  const Parallelism& p = s.deployment.parallelism;
  const ServingOptions& o = s.options;
  const std::string layout = fmt::format("{} x{} (tp {}, attention_dp {}, ep {})", s.deployment.hardware.name, p.gpus(),
                                         p.tp, p.attention_dp, p.ep);
  if (o.disaggregated) {
    return fmt::format("{} prefill + {} decode replicas of {}; batch <= {} / {} sequences, {} tokens per iteration",
                       o.prefill_replicas, o.decode_replicas, layout, o.limits.max_sequences,
                       o.decode_limits.max_sequences, o.limits.max_batched_tokens);
  }
  return fmt::format("{} replicas of {}; batch <= {} sequences, {} tokens per iteration", o.replicas, layout,
                     o.limits.max_sequences, o.limits.max_batched_tokens);
}

nlohmann::ordered_json pct_json(const Percentiles& p) {
  return {{"mean", p.mean}, {"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"max", p.max}, {"count", p.count}};
}

// Why the rejected requests were turned away, the largest count first, with the limit each one met.
std::string rejection_line(const ServingScenario& s, const ServingResult& r) {
  std::vector<std::pair<int64_t, std::string>> parts;
  for (const Rejection why : kAllRejections) {
    const int64_t n = r.rejected_by[static_cast<int>(why)];
    if (n == 0) continue;
    switch (why) {
      case Rejection::beyond_positions:
        parts.emplace_back(
            n, fmt::format("{} longer (prompt + output) than the model's {} positions", n, r.max_positions));
        break;
      case Rejection::memory:
        parts.emplace_back(n, fmt::format("{} whose KV and state never fit a replica's {:.2f} GiB per GPU, even alone",
                                          n, r.kv_capacity_bytes_per_gpu / double(1ull << 30)));
        break;
      case Rejection::ttft_admission:
        parts.emplace_back(n, fmt::format("{} turned away because the queue ahead already exceeded TTFT {:g} ms", n,
                                          s.options.slo.ttft_ms));
        break;
      case Rejection::none: break;
    }
  }
  std::stable_sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string line;
  for (const auto& [n, text] : parts) line += (line.empty() ? "" : "; ") + text;
  return line;
}

}  // namespace

std::string format_serving(const ServingScenario& s, const ServingResult& r) {
  std::string out = fmt::format("{}\n  deployment  {}\n", s.deployment.name, deployment_line(s));
  out += fmt::format("  requests    {} ({} completed, {} rejected) over {:.1f} s; {} iterations\n", r.requests.size(),
                     r.completed, r.rejected, r.duration_ms / 1000, r.iterations);
  if (r.rejected > 0) out += fmt::format("  rejected    {}\n", rejection_line(s, r));
  if (s.options.slo.ttft_ms > 0 || s.options.slo.tpot_ms > 0) {
    out += fmt::format("  SLO         TTFT <= {:g} ms, TPOT <= {:g} ms: {} of {} completed requests met both\n",
                       s.options.slo.ttft_ms, s.options.slo.tpot_ms, r.met_slo, r.completed);
  }
  out += fmt::format("\n  {:<12}{:>12}{:>12}{:>12}{:>12}{:>12}\n", "ms", "mean", "p50", "p90", "p99", "max");
  for (auto [name, p] : {std::pair<const char*, const Percentiles*>{"TTFT", &r.ttft_ms},
                         {"TPOT", &r.tpot_ms},
                         {"end to end", &r.e2e_ms}}) {
    out += fmt::format("  {:<12}{:>12.1f}{:>12.1f}{:>12.1f}{:>12.1f}{:>12.1f}\n", name, p->mean, p->p50, p->p90, p->p99,
                       p->max);
  }
  double util = 0;
  for (double u : r.utilisation) util += u / double(r.utilisation.size());
  out += fmt::format("\n  throughput  {:.0f} output tokens/s ({:.1f} per GPU over {} GPUs), {:.1f} tokens/s per user\n",
                     r.output_tokens_per_s, r.tokens_per_s_per_gpu, r.gpus, r.tokens_per_s_per_user);
  out += fmt::format("  goodput     {:.2f} requests/s, {:.0f} output tokens/s within the SLOs\n",
                     r.goodput_requests_per_s, r.goodput_tokens_per_s);
  out += fmt::format(
      "  busy        {:.1f}% of the time on average over {} replicas; memory peak {:.1f}% of the KV/state space\n",
      util * 100, r.utilisation.size(), r.max_memory_fraction * 100);
  out += fmt::format("  tokens      {} prompt tokens computed, {} decoded\n", r.prefill_tokens, r.decode_tokens);
  return out;
}

nlohmann::ordered_json to_json(const ServingScenario& s, const ServingResult& r) {
  nlohmann::ordered_json j = output_header("k3perf-serve", 1);
  j["scenario"] = {{"name", s.deployment.name},
                   {"source", s.deployment.source},
                   {"deployment", deployment_line(s)},
                   {"gpus", r.gpus},
                   {"slo", {{"ttft_ms", s.options.slo.ttft_ms}, {"tpot_ms", s.options.slo.tpot_ms}}}};
  j["summary"] = {{"requests", r.requests.size()},
                  {"completed", r.completed},
                  {"rejected", r.rejected},
                  {"rejected_by",
                   {{"beyond_positions", r.rejected_by[static_cast<int>(Rejection::beyond_positions)]},
                    {"memory", r.rejected_by[static_cast<int>(Rejection::memory)]},
                    {"ttft_admission", r.rejected_by[static_cast<int>(Rejection::ttft_admission)]}}},
                  {"met_slo", r.met_slo},
                  {"duration_ms", r.duration_ms},
                  {"iterations", r.iterations},
                  {"output_tokens_per_s", r.output_tokens_per_s},
                  {"tokens_per_s_per_gpu", r.tokens_per_s_per_gpu},
                  {"tokens_per_s_per_user", r.tokens_per_s_per_user},
                  {"goodput_requests_per_s", r.goodput_requests_per_s},
                  {"goodput_tokens_per_s", r.goodput_tokens_per_s},
                  {"max_memory_fraction", r.max_memory_fraction},
                  {"prefill_tokens", r.prefill_tokens},
                  {"decode_tokens", r.decode_tokens}};
  j["ttft_ms"] = pct_json(r.ttft_ms);
  j["tpot_ms"] = pct_json(r.tpot_ms);
  j["e2e_ms"] = pct_json(r.e2e_ms);
  j["utilisation_per_replica"] = r.utilisation;
  nlohmann::ordered_json q = nlohmann::ordered_json::array();
  for (const QueueSample& x : r.queue) {
    q.push_back({{"time_ms", x.time_ms},
                 {"waiting", x.waiting},
                 {"running", x.running},
                 {"memory_fraction", x.memory_fraction}});
  }
  j["queue"] = std::move(q);
  return j;
}

std::string requests_csv(const ServingResult& r) {
  std::string out =
      "id,arrival_ms,input_tokens,cached_tokens,output_tokens,rejected,first_token_ms,finish_ms,ttft_ms,tpot_ms,e2e_"
      "ms\n";
  for (const RequestOutcome& q : r.requests) {
    if (q.rejected) {
      out += fmt::format("{},{:.6g},{},{},{},1,,,,,\n", q.id, q.arrival_ms, q.input_tokens, q.cached_tokens,
                         q.output_tokens);
      continue;
    }
    out += fmt::format("{},{:.6g},{},{},{},0,{:.6f},{:.6f},{:.6f},{:.6f},{:.6f}\n", q.id, q.arrival_ms, q.input_tokens,
                       q.cached_tokens, q.output_tokens, q.first_token_ms, q.finish_ms, q.ttft_ms(), q.tpot_ms(),
                       q.e2e_ms());
  }
  return out;
}

}  // namespace k3::serving
