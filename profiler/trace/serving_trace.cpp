#include "profiler/trace/serving_trace.h"

#include "core/error.h"
#include "profiler/trace/chrome_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace k3::profiler {

namespace {

std::int64_t ns(double ms) { return static_cast<std::int64_t>(std::llround(ms * 1e6)); }

struct Phase {
  const char* name;
  double start_ms, end_ms;
};

// One request's time on one replica: its span and the phases inside it.
struct Segment {
  int replica = 0;
  std::int64_t request = 0;  // index into ServingResult::requests
  double start_ms = 0, end_ms = 0;
  std::vector<Phase> phases;
};

}  // namespace

std::string serving_trace_json(const serving::ServingResult& r, const std::string& title) {
  K3_CHECK(!r.replica_roles.empty(), "the serving trace needs a simulation run with record_schedule");
  const int replicas = static_cast<int>(r.replica_roles.size());
  std::vector<Segment> segments;
  for (std::size_t i = 0; i < r.requests.size(); ++i) {
    const serving::RequestOutcome& q = r.requests[i];
    if (q.rejected || q.replica < 0) continue;
    const bool handed_off = q.handoff_ms >= 0 && q.decode_replica >= 0;
    Segment first{q.replica, static_cast<std::int64_t>(i), q.arrival_ms, handed_off ? q.handoff_ms : q.finish_ms, {}};
    first.phases.push_back({"queue", q.arrival_ms, q.admitted_ms});
    first.phases.push_back({"prefill", q.admitted_ms, q.first_token_ms});
    if (handed_off) {
      first.phases.push_back({"transfer", q.first_token_ms, q.handoff_ms});
      Segment second{q.decode_replica, static_cast<std::int64_t>(i), q.handoff_ms, q.finish_ms, {}};
      second.phases.push_back({"decode queue", q.handoff_ms, q.decode_admitted_ms});
      second.phases.push_back({"decode", q.decode_admitted_ms, q.finish_ms});
      segments.push_back(std::move(second));
    } else {
      first.phases.push_back({"decode", q.first_token_ms, q.finish_ms});
    }
    segments.push_back(std::move(first));
  }
  // First fit per replica, by start (a lane is free once its last span has ended).
  std::stable_sort(segments.begin(), segments.end(), [](const Segment& a, const Segment& b) {
    return a.start_ms != b.start_ms ? a.start_ms < b.start_ms : a.request < b.request;
  });
  std::vector<std::vector<std::int64_t>> lane_end(replicas);
  std::vector<int> lane(segments.size(), 0);
  for (std::size_t k = 0; k < segments.size(); ++k) {
    std::vector<std::int64_t>& ends = lane_end.at(segments[k].replica);
    std::size_t l = 0;
    while (l < ends.size() && ends[l] > ns(segments[k].start_ms)) ++l;
    if (l == ends.size()) ends.push_back(0);
    ends[l] = ns(segments[k].end_ms);
    lane[k] = static_cast<int>(l);
  }

  ChromeTraceBuilder b;
  int prefill = 0, decode = 0;
  for (int ri = 0; ri < replicas; ++ri) {
    const std::string& role = r.replica_roles[ri];
    b.process(ri, role == "aggregated" ? fmt::format("replica {}", ri)
                                       : fmt::format("{} replica {}", role, role == "prefill" ? prefill++ : decode++));
    b.thread(ri, 0, "iterations");
    for (std::size_t l = 0; l < lane_end[ri].size(); ++l)
      b.thread(ri, 1 + std::int64_t(l), fmt::format("requests {}", l + 1));
  }
  for (const serving::IterationRecord& it : r.schedule) {
    b.complete(it.replica, 0, "iteration", "iteration", ns(it.start_ms), ns(it.end_ms),
               {{"decode_sequences", it.decode_sequences},
                {"prefill_sequences", it.prefill_sequences},
                {"prefill_tokens", it.prefill_tokens},
                {"tokens", it.decode_sequences + it.prefill_tokens}});
  }
  for (std::size_t k = 0; k < segments.size(); ++k) {
    const Segment& s = segments[k];
    const serving::RequestOutcome& q = r.requests[s.request];
    const std::int64_t tid = 1 + lane[k];
    b.complete(s.replica, tid, "request", fmt::format("request {}", q.id), ns(s.start_ms), ns(s.end_ms),
               {{"id", q.id},
                {"input_tokens", q.input_tokens},
                {"cached_tokens", q.cached_tokens},
                {"output_tokens", q.output_tokens},
                {"ttft_ms", q.ttft_ms()},
                {"tpot_ms", q.tpot_ms()}});
    for (const Phase& p : s.phases) {
      if (ns(p.end_ms) > ns(p.start_ms))
        b.complete(s.replica, tid, "request_phase", p.name, ns(p.start_ms), ns(p.end_ms));
    }
  }
  nlohmann::ordered_json& m = b.metadata();
  m["source"] = "k3perf serve";
  m["serving"] = title;
  m["clock"] = "simulated: ns from the request trace's zero";
  m["replicas"] = replicas;
  m["requests"] = r.requests.size();
  m["completed"] = r.completed;
  m["rejected"] = r.rejected;
  m["iterations"] = r.iterations;
  return b.json();
}

}  // namespace k3::profiler
