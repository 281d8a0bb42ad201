// The synthetic session generator: deterministic for a seed, prompts that resend the previous turn
// plus its answer and new tokens, hashes that share exactly the shared content, and its YAML form.
#include "core/yaml_reader.h"
#include "expect_input_error.h"
#include "sim/workload/synthetic.h"
#include "sim/workload/trace_stats.h"

#include <gtest/gtest.h>

#include <map>

namespace k3::workload {
namespace {

SessionWorkloadSpec agent_spec() {
  SessionWorkloadSpec s;
  s.sessions = 50;
  s.turns_min = 2;
  s.turns_max = 6;
  s.system_prompts = 3;
  s.system_prompt_tokens = 1500;
  s.first_user_tokens_min = 300;
  s.first_user_tokens_max = 5000;
  s.new_tokens_min = 10;
  s.new_tokens_max = 900;
  s.output_tokens_min = 5;
  s.output_tokens_max = 700;
  s.think_time_ms_min = 1000;
  s.think_time_ms_max = 20000;
  s.sessions_per_s = 2;
  s.block_tokens = 64;
  return s;
}

TEST(SyntheticSessions, SameSeedSameRequestsOtherSeedOthers) {
  const auto a = generate_sessions(agent_spec(), 7), b = generate_sessions(agent_spec(), 7);
  const auto c = generate_sessions(agent_spec(), 8);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].arrival_ms, b[i].arrival_ms);
    EXPECT_EQ(a[i].input_tokens, b[i].input_tokens);
    EXPECT_EQ(a[i].block_hashes, b[i].block_hashes);
  }
  bool differs = a.size() != c.size();
  for (std::size_t i = 0; !differs && i < a.size(); ++i) differs = a[i].input_tokens != c[i].input_tokens;
  EXPECT_TRUE(differs);
}

TEST(SyntheticSessions, EachTurnResendsThePreviousPromptAndAnswer) {
  const auto reqs = generate_sessions(agent_spec(), 3);
  std::map<int64_t, std::vector<const Request*>> by_session;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(reqs[i].id, static_cast<int64_t>(i));
    if (i > 0) {
      EXPECT_GE(reqs[i].arrival_ms, reqs[i - 1].arrival_ms);
    }
    by_session[reqs[i].session_id].push_back(&reqs[i]);
  }
  EXPECT_EQ(by_session.size(), 50u);
  for (const auto& [id, turns] : by_session) {
    ASSERT_GE(turns.size(), 2u);
    ASSERT_LE(turns.size(), 6u);
    for (std::size_t t = 1; t < turns.size(); ++t) {
      const Request& prev = *turns[t - 1];
      const Request& cur = *turns[t];
      const int64_t added = cur.input_tokens - prev.input_tokens - prev.output_tokens;
      EXPECT_GE(added, 10);
      EXPECT_LE(added, 900);
      EXPECT_GT(cur.arrival_ms, prev.arrival_ms);
      // Every full block of the previous prompt is shared; the partial last block is not.
      const std::size_t full = static_cast<std::size_t>(prev.input_tokens / 64);
      for (std::size_t b = 0; b < full; ++b) EXPECT_EQ(cur.block_hashes[b], prev.block_hashes[b]);
      if (prev.input_tokens % 64 != 0) {
        EXPECT_NE(cur.block_hashes[full], prev.block_hashes[full]);
      }
      EXPECT_EQ(cur.block_hashes.size(), static_cast<std::size_t>((cur.input_tokens + 63) / 64));
    }
  }
}

TEST(SyntheticSessions, DifferentSessionsShareOnlyTheSystemPrompt) {
  SessionWorkloadSpec s = agent_spec();
  s.system_prompts = 1;
  s.turns_min = s.turns_max = 1;
  const auto reqs = generate_sessions(s, 11);
  // 1500 tokens = 23 full blocks of 64 shared by all; the 24th block mixes in each user's tokens.
  for (const Request& r : reqs) {
    for (int b = 0; b < 23; ++b) EXPECT_EQ(r.block_hashes[b], reqs[0].block_hashes[b]);
    if (r.id != 0) {
      EXPECT_NE(r.block_hashes[23], reqs[0].block_hashes[23]);
    }
  }
  // Reuse = 23 blocks of every request after the first, over all prompt tokens.
  const TraceStats st = trace_stats(reqs);
  EXPECT_NEAR(st.prefix_reuse, double(23 * 64 * (reqs.size() - 1)) / double(st.input_tokens), 1e-12);
}

TEST(SyntheticSessions, BurstyArrivalsStartSessionsTogether) {
  SessionWorkloadSpec s = agent_spec();
  s.turns_min = s.turns_max = 1;
  s.sessions = 400;
  s.arrivals = ArrivalKind::bursty;
  s.mean_burst_sessions = 8;
  const auto reqs = generate_sessions(s, 5);
  int64_t same_instant = 0;
  for (std::size_t i = 1; i < reqs.size(); ++i) same_instant += reqs[i].arrival_ms == reqs[i - 1].arrival_ms;
  // Bursts of 1..15 sessions (mean 8): about 7/8 of arrivals share their burst's instant.
  EXPECT_GT(same_instant, 300);
  // Mean rate is kept: 400 sessions at 2/s take about 200 s.
  EXPECT_GT(reqs.back().arrival_ms, 100e3);
  EXPECT_LT(reqs.back().arrival_ms, 400e3);
  s.arrivals = ArrivalKind::poisson;
  const auto poisson = generate_sessions(s, 5);
  int64_t poisson_same = 0;
  for (std::size_t i = 1; i < poisson.size(); ++i) poisson_same += poisson[i].arrival_ms == poisson[i - 1].arrival_ms;
  EXPECT_EQ(poisson_same, 0);
}

TEST(SyntheticSessions, ReadsItsYamlFormAndRejectsTypos) {
  const YamlNode y = YamlNode::load_string(
      "sessions: 4\nturns: [2, 3]\nsystem_prompt_tokens: 100\nfirst_user_tokens: 50\nnew_tokens: [5, 9]\n"
      "output_tokens: [1, 2]\nthink_time_ms: [10, 20]\narrivals: bursty\nsessions_per_s: 0.5\nmean_burst_sessions: 2\n"
      "block_tokens: 16\n",
      "w.yaml");
  const SessionWorkloadSpec s = parse_session_workload(y);
  EXPECT_EQ(s.sessions, 4);
  EXPECT_EQ(s.turns_min, 2);
  EXPECT_EQ(s.turns_max, 3);
  EXPECT_EQ(s.new_tokens_max, 9);
  EXPECT_EQ(s.arrivals, ArrivalKind::bursty);
  EXPECT_EQ(s.block_tokens, 16);
  test::expect_input_error(
      [] {
        parse_session_workload(YamlNode::load_string(
            "sessions: 4\nfirst_user_tokens: 5\noutput_tokens: 1\nsessions_per_s: 1\nturnz: 3\n", "w.yaml"));
      },
      {"w.yaml", "turnz"});
  test::expect_input_error(
      [] {
        parse_session_workload(YamlNode::load_string(
            "sessions: 4\nfirst_user_tokens: [9, 5]\noutput_tokens: 1\nsessions_per_s: 1\n", "w.yaml"));
      },
      {"w.yaml", "first_user_tokens", "min <= max"});
}

// A few lines can ask for more than any machine holds: refused, with the figure, before anything is generated. The
// estimate bounds what generation holds: a small spec's requests and hashes fit in it.
TEST(SyntheticWorkload, MemoryAndPromptLengthAreCheckedBeforeGenerating) {
  const std::string base = "first_user_tokens: 1073741824\noutput_tokens: 1\nsessions_per_s: 1\nblock_tokens: 1\n";
  test::expect_input_error([&] { parse_session_workload(YamlNode::load_string("sessions: 1000\n" + base, "w.yaml")); },
                           {"w.yaml", "GB of memory", "the limit is 8.59 GB"});
  test::expect_input_error(
      [] {
        parse_session_workload(YamlNode::load_string(
            "sessions: 1\nturns: 1000\nfirst_user_tokens: 1\nnew_tokens: 2000000\noutput_tokens: 1\n"
            "sessions_per_s: 1\n",
            "w.yaml"));
      },
      {"w.yaml", "the prompt of turn 1000 would hold 1998001000 tokens", "exceeds 1073741824"});
  const SessionWorkloadSpec small = parse_session_workload(YamlNode::load_string(
      "sessions: 20\nturns: [1, 6]\nsystem_prompt_tokens: 100\nfirst_user_tokens: [10, 900]\nnew_tokens: 50\n"
      "output_tokens: [1, 30]\nsessions_per_s: 1\nblock_tokens: 16\n",
      "w.yaml"));
  double held = 0;
  for (const Request& r : generate_sessions(small, 7)) {
    held += sizeof(Request) + r.block_hashes.size() * sizeof(uint64_t);
  }
  EXPECT_LE(held, session_workload_bytes(small));
}

}  // namespace
}  // namespace k3::workload
