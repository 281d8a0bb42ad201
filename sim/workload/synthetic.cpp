#include "sim/workload/synthetic.h"

#include "core/error.h"
#include "core/limits.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>

namespace k3::workload {
namespace {

// SplitMix64 finaliser: a well-mixed 64-bit function of its input.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
uint64_t combine(uint64_t a, uint64_t b) { return mix(a ^ (mix(b) + 0x632be59bd9b4e019ull)); }

class Random {
 public:
  explicit Random(uint64_t seed) : engine_(seed) {}
  int64_t uniform_int(int64_t lo, int64_t hi) {  // inclusive
    K3_CHECK(lo <= hi, "empty range [{}, {}]", lo, hi);
    return lo + static_cast<int64_t>(engine_() % static_cast<uint64_t>(hi - lo + 1));
  }
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  double exponential(double mean) { return -mean * std::log1p(-uniform()); }

 private:
  std::mt19937_64 engine_;
};

// A prompt as a list of content pieces; token i of a piece is identified by (piece id, i).
struct Piece {
  uint64_t id;
  int64_t tokens;
};

std::vector<uint64_t> block_hashes(const std::vector<Piece>& prompt, int64_t block_tokens) {
  std::vector<uint64_t> out;
  uint64_t h = 0x4b3370726566ull;  // chain seed
  int64_t in_block = 0;
  for (const Piece& p : prompt) {
    int64_t offset = 0;
    while (offset < p.tokens) {
      const int64_t take = std::min(p.tokens - offset, block_tokens - in_block);
      h = combine(combine(combine(h, p.id), static_cast<uint64_t>(offset)), static_cast<uint64_t>(take));
      offset += take;
      in_block += take;
      if (in_block == block_tokens) {
        out.push_back(h);
        in_block = 0;
      }
    }
  }
  if (in_block > 0) out.push_back(h);
  return out;
}

struct Range {
  int64_t lo, hi;
};

}  // namespace

std::vector<Request> generate_sessions(const SessionWorkloadSpec& s, uint64_t seed) {
  K3_CHECK(s.sessions >= 0 && s.turns_min >= 1 && s.turns_min <= s.turns_max && s.system_prompts >= 1 &&
               s.block_tokens >= 1 && s.sessions_per_s > 0 && s.mean_burst_sessions >= 1,
           "invalid session workload spec");
  Random rng(seed);
  std::vector<std::tuple<double, int64_t, int64_t, Request>> all;  // (arrival, session, turn, request)
  double start_ms = 0;
  int64_t left_in_burst = 0;
  for (int64_t session = 0; session < s.sessions; ++session) {
    if (s.arrivals == ArrivalKind::poisson) {
      start_ms += rng.exponential(1000.0 / s.sessions_per_s);
    } else if (left_in_burst == 0) {
      // Bursts arrive as a Poisson process at rate / mean burst size; a burst's sessions start together.
      start_ms += rng.exponential(1000.0 * s.mean_burst_sessions / s.sessions_per_s);
      const int64_t max_burst = static_cast<int64_t>(std::llround(2 * s.mean_burst_sessions - 1));
      left_in_burst = rng.uniform_int(1, std::max<int64_t>(1, max_burst));
    }
    if (left_in_burst > 0) --left_in_burst;
    const int64_t turns = rng.uniform_int(s.turns_min, s.turns_max);
    std::vector<Piece> prompt;
    if (s.system_prompt_tokens > 0) {
      prompt.push_back(
          {combine(1, static_cast<uint64_t>(rng.uniform_int(0, s.system_prompts - 1))), s.system_prompt_tokens});
    }
    double arrival = start_ms;
    for (int64_t turn = 0; turn < turns; ++turn) {
      const int64_t user = turn == 0 ? rng.uniform_int(s.first_user_tokens_min, s.first_user_tokens_max)
                                     : rng.uniform_int(s.new_tokens_min, s.new_tokens_max);
      const uint64_t key = combine(static_cast<uint64_t>(session), static_cast<uint64_t>(turn));
      prompt.push_back({combine(2, key), user});
      Request r;
      r.session_id = session;
      r.arrival_ms = arrival;
      for (const Piece& p : prompt) r.input_tokens += p.tokens;
      r.output_tokens = rng.uniform_int(s.output_tokens_min, s.output_tokens_max);
      r.block_hashes = block_hashes(prompt, s.block_tokens);
      r.block_tokens = r.block_hashes.empty() ? 0 : s.block_tokens;
      prompt.push_back({combine(3, key), r.output_tokens});  // the answer is part of the next turn's prompt
      all.emplace_back(arrival, session, turn, std::move(r));
      arrival += rng.uniform(s.think_time_ms_min, s.think_time_ms_max);
    }
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a), std::get<2>(a)) <
           std::tie(std::get<0>(b), std::get<1>(b), std::get<2>(b));
  });
  std::vector<Request> out;
  out.reserve(all.size());
  for (auto& t : all) {
    out.push_back(std::move(std::get<3>(t)));
    out.back().id = static_cast<int64_t>(out.size()) - 1;
  }
  return out;
}

namespace {

Range read_range(const YamlNode& n, const IntLimit& limit) {
  if (n.is_sequence()) {
    const std::vector<YamlNode> items = n.items();
    if (items.size() != 2) n.fail("expected [min, max] or one number");
    const Range r{read_int<int64_t>(items[0], limit), read_int<int64_t>(items[1], limit)};
    if (r.lo > r.hi) n.fail(fmt::format("expected min <= max, got [{}, {}]", r.lo, r.hi));
    return r;
  }
  const int64_t v = read_int<int64_t>(n, limit);
  return {v, v};
}

std::pair<double, double> read_time_range(const YamlNode& n) {
  if (n.is_sequence()) {
    const std::vector<YamlNode> items = n.items();
    if (items.size() != 2) n.fail("expected [min, max] or one number");
    const double lo = items[0].as_non_negative(), hi = items[1].as_non_negative();
    if (lo > hi) n.fail(fmt::format("expected min <= max, got [{}, {}]", lo, hi));
    return {lo, hi};
  }
  const double v = n.as_non_negative();
  return {v, v};
}

}  // namespace

SessionWorkloadSpec parse_session_workload(const YamlNode& n) {
  n.expect_keys({"sessions", "turns", "system_prompts", "system_prompt_tokens", "first_user_tokens", "new_tokens",
                 "output_tokens", "think_time_ms", "arrivals", "sessions_per_s", "mean_burst_sessions",
                 "block_tokens"});
  SessionWorkloadSpec s;
  constexpr IntLimit tokens = at_least(limit::tokens, 1);
  s.sessions = read_int<int64_t>(n["sessions"], limit::requests);
  if (auto t = n.find("turns")) {
    const Range turns = read_range(*t, limit::requests);
    std::tie(s.turns_min, s.turns_max) = std::pair{turns.lo, turns.hi};
    if (s.sessions * s.turns_max > limit::requests.max) {
      t->fail(fmt::format("{} sessions x {} turns = {}", s.sessions, s.turns_max,
                          exceeds(s.sessions * s.turns_max, limit::requests)));
    }
  }
  if (auto v = n.find("system_prompts")) s.system_prompts = read_int<int64_t>(*v, limit::requests);
  if (auto v = n.find("system_prompt_tokens")) s.system_prompt_tokens = read_int<int64_t>(*v, limit::tokens);
  const Range first = read_range(n["first_user_tokens"], tokens);
  s.first_user_tokens_min = first.lo;
  s.first_user_tokens_max = first.hi;
  if (auto v = n.find("new_tokens")) {
    const Range r = read_range(*v, tokens);
    s.new_tokens_min = r.lo;
    s.new_tokens_max = r.hi;
  }
  const Range out = read_range(n["output_tokens"], tokens);
  s.output_tokens_min = out.lo;
  s.output_tokens_max = out.hi;
  if (auto v = n.find("think_time_ms")) std::tie(s.think_time_ms_min, s.think_time_ms_max) = read_time_range(*v);
  if (auto v = n.find("arrivals")) {
    s.arrivals = v->as_choice({"poisson", "bursty"}) == "poisson" ? ArrivalKind::poisson : ArrivalKind::bursty;
  }
  s.sessions_per_s = n["sessions_per_s"].as_positive();
  if (auto v = n.find("mean_burst_sessions")) {
    s.mean_burst_sessions = v->as_positive();
    if (s.mean_burst_sessions < 1) v->fail(fmt::format("expected at least 1, got {}", s.mean_burst_sessions));
  }
  if (auto v = n.find("block_tokens")) s.block_tokens = read_int<int64_t>(*v, tokens);
  // A turn's prompt holds every earlier turn: the last one must still be a count of tokens, and all of them
  // together must fit in memory, refused here before anything is generated.
  const double longest_prompt = double(s.system_prompt_tokens) + double(s.first_user_tokens_max) +
                                double(s.turns_max - 1) * double(s.new_tokens_max + s.output_tokens_max);
  if (longest_prompt > double(limit::tokens.max)) {
    n.fail(fmt::format("the prompt of turn {} would hold {:.0f} tokens: {}", s.turns_max, longest_prompt,
                       exceeds(static_cast<long long>(std::min(longest_prompt, 9e18)), limit::tokens)));
  }
  const double bytes = session_workload_bytes(s);
  if (bytes > limit::input_memory.value) {
    n.fail(
        fmt::format("the requests would take {:.3g} GB of memory (their block hashes at {} tokens a block); "
                    "the limit is {:.3g} GB",
                    bytes / 1e9, s.block_tokens, limit::input_memory.value / 1e9));
  }
  return s;
}

double session_workload_bytes(const SessionWorkloadSpec& s) {
  // Turn t's prompt is at most system + first + t (new + output) tokens; a request costs its hashes, one per
  // started block, and its place in the generator's table and the result.
  const double turns = double(s.turns_max), block = double(std::max<int64_t>(s.block_tokens, 1));
  const double first = double(s.system_prompt_tokens + s.first_user_tokens_max);
  const double step = double(s.new_tokens_max + s.output_tokens_max);
  const double tokens_per_session = turns * first + step * turns * (turns - 1) / 2;
  const double hashes_per_session = tokens_per_session / block + turns;
  constexpr double kRequestBytes = 2.0 * (sizeof(Request) + sizeof(double) + 2 * sizeof(int64_t));
  return double(s.sessions) * (hashes_per_session * sizeof(uint64_t) * 2 + turns * kRequestBytes);
}

}  // namespace k3::workload
