#include "sim/serving/simulator.h"

#include "core/error.h"
#include "core/limits.h"
#include "core/op_graph.h"
#include "sim/collective_time.h"
#include "sim/memory.h"
#include "sim/roofline.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>
#include <queue>
#include <tuple>

namespace k3::serving {

ReplicaModel::ReplicaModel(const Scenario& s, int64_t max_batched_tokens) : step(s) {
  const Parallelism& par = s.parallelism;
  gpus = par.gpus();
  attention_dp = par.attention_dp;
  // Per GPU: weights and reserve from a one-token decode graph; activations from the largest
  // iteration, a full-budget prefill chunk in every attention group.
  const MemoryBreakdown m =
      estimate_memory(s, build_op_graph(s.model, Phase::decode(par.attention_dp, 0), par, s.precision));
  const long long chunk = std::max<int64_t>(1, max_batched_tokens);
  const MemoryBreakdown pm =
      estimate_memory(s, build_op_graph(s.model, Phase::prefill(par.attention_dp, chunk, 0, chunk), par, s.precision));
  max_positions = s.model.max_position_embeddings;
  kv_bytes_per_token = m.kv_bytes_per_token;
  state_bytes_per_sequence = m.state_bytes_per_sequence;
  capacity_bytes = m.usable_bytes - m.weights_bytes - m.reserved_bytes - pm.activation_bytes;
  // A hand-off goes from every GPU of a prefill replica to its peer in a decode replica, all at once.
  const LinkSpec& link = link_for(s.hardware, 2 * gpus);
  transfer_latency_us = collective_latency(s.hardware, CollectiveKind::send_recv, 2 * gpus).latency_us;
  transfer_us_per_byte = 1e6 / (link.bandwidth_bytes_per_s * link.efficiency);
}

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  p.count = static_cast<int64_t>(v.size());
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / double(v.size());
  auto rank = [&](double q) {
    const double r = std::ceil(q / 100.0 * double(v.size()));
    return v[static_cast<std::size_t>(std::clamp(r, 1.0, double(v.size()))) - 1];
  };
  p.p50 = rank(50);
  p.p90 = rank(90);
  p.p99 = rank(99);
  p.max = v.back();
  return p;
}

namespace {

enum class EventKind : int { iteration_end = 0, transfer_done = 1, arrival = 2 };

struct Event {
  double time_us;
  EventKind kind;
  int64_t id;  // replica for iteration_end, request for the others
  bool operator>(const Event& o) const { return std::tie(time_us, kind, id) > std::tie(o.time_us, o.kind, o.id); }
};

enum class Role { both, prefill, decode };

struct Seq : SequenceState {
  double reserved = 0;  // bytes per GPU held on `replica`
  int replica = -1;
  bool running = false;  // in `replica`'s running batch
};

struct Replica {
  Role role = Role::both;
  const ReplicaModel* model = nullptr;
  BatchLimits limits;
  double capacity = 0;              // per GPU and attention group, times the groups (a balanced pool)
  double group_capacity = 0;        // what one sequence can at most hold
  double prefill_us_per_token = 0;  // a full-budget chunk's time per token (TTFT prediction)
  std::deque<int64_t> waiting;
  std::vector<int64_t> running;
  std::vector<std::pair<int64_t, int64_t>> batch;  // (request, prefill tokens; 0 = one decode token)
  double reserved = 0;
  bool busy = false;
  double busy_until_us = 0;
  double busy_us = 0;
  int64_t queued_prefill_tokens = 0;  // prompt tokens still to compute, waiting and running
  int64_t load() const { return static_cast<int64_t>(waiting.size() + running.size()); }
};

class Simulation {
 public:
  Simulation(const std::vector<workload::Request>& requests, const std::vector<int64_t>& cached,
             const ReplicaModel& prefill_model, const ReplicaModel& decode_model, const ServingOptions& o)
      : requests_(requests), o_(o), scheduler_(Schedulers::instance().make(o.scheduler, o.scheduler_params)) {
    K3_CHECK(cached.empty() || cached.size() == requests.size(), "{} cached-prefix counts for {} requests",
             cached.size(), requests.size());
    auto add = [&](Role role, const ReplicaModel& m, const BatchLimits& limits) {
      if (m.capacity_bytes <= 0) {
        throw InputError(
            fmt::format("the weights, activations and reserve leave no memory for KV and state "
                        "({:.2f} GiB per GPU short)",
                        -m.capacity_bytes / double(1ull << 30)));
      }
      Replica r;
      r.role = role;
      r.model = &m;
      r.limits = limits;
      r.group_capacity = m.capacity_bytes;
      r.capacity = m.capacity_bytes * m.attention_dp;
      BatchShape full;
      full.add_prefill(double(limits.max_batched_tokens), 0);
      r.prefill_us_per_token = m.step.step_us(full) / double(limits.max_batched_tokens);
      replicas_.push_back(std::move(r));
    };
    K3_CHECK(o.limits.max_sequences > 0 && o.limits.max_batched_tokens > 0, "batch limits must be positive");
    if (o.disaggregated) {
      K3_CHECK(o.prefill_replicas > 0 && o.decode_replicas > 0, "disaggregation needs prefill and decode replicas");
      K3_CHECK(o.decode_limits.max_sequences > 0, "decode batch limit must be positive");
      for (int i = 0; i < o.prefill_replicas; ++i) add(Role::prefill, prefill_model, o.limits);
      for (int i = 0; i < o.decode_replicas; ++i) add(Role::decode, decode_model, o.decode_limits);
      result_.gpus = o.prefill_replicas * prefill_model.gpus + o.decode_replicas * decode_model.gpus;
      result_.kv_capacity_bytes_per_gpu = std::min(prefill_model.capacity_bytes, decode_model.capacity_bytes);
    } else {
      K3_CHECK(o.replicas > 0, "need at least one replica");
      for (int i = 0; i < o.replicas; ++i) add(Role::both, prefill_model, o.limits);
      result_.gpus = o.replicas * prefill_model.gpus;
      result_.kv_capacity_bytes_per_gpu = prefill_model.capacity_bytes;
    }
    result_.max_positions = prefill_model.max_positions;
    if (o.record_schedule) {
      for (const Replica& r : replicas_) {
        result_.replica_roles.push_back(r.role == Role::both      ? "aggregated"
                                        : r.role == Role::prefill ? "prefill"
                                                                  : "decode");
      }
    }
    seqs_.resize(requests.size());
    result_.requests.resize(requests.size());
    for (std::size_t i = 0; i < requests.size(); ++i) {
      const workload::Request& q = requests[i];
      const int64_t input = std::max<int64_t>(1, q.input_tokens);
      Seq& s = seqs_[i];
      s.cached = cached.empty() ? 0 : std::clamp<int64_t>(cached[i], 0, input - 1);
      s.prompt_new = input - s.cached;
      s.output = std::max<int64_t>(1, q.output_tokens);
      RequestOutcome& out = result_.requests[i];
      out.id = q.id;
      out.arrival_ms = q.arrival_ms;
      out.input_tokens = input;
      out.cached_tokens = s.cached;
      out.output_tokens = s.output;
      if (i > 0) K3_CHECK(q.arrival_ms >= requests[i - 1].arrival_ms, "requests are not in arrival order at {}", i);
    }
  }

  ServingResult run() {
    next_sample_us_ = requests_.empty() ? 0 : requests_.front().arrival_ms * 1000.0;
    // Arrivals come from the requests in order, not from the queue: it holds only the few events in flight.
    const int64_t n = static_cast<int64_t>(requests_.size());
    int64_t next_arrival = 0, reported = -1;
    while (next_arrival < n || !events_.empty()) {
      Event e{};
      const Event arrival =
          next_arrival < n ? Event{requests_[next_arrival].arrival_ms * 1000.0, EventKind::arrival, next_arrival} : e;
      if (next_arrival < n && (events_.empty() || events_.top() > arrival)) {
        e = arrival;
        ++next_arrival;
      } else {
        e = events_.top();
        events_.pop();
      }
      if (o_.progress) {  // at most once per 1/1000 of the requests done
        const int64_t done = result_.completed + result_.rejected;
        if (done * 1000 / std::max<int64_t>(n, 1) != reported) {
          reported = done * 1000 / std::max<int64_t>(n, 1);
          o_.progress(done, n);
        }
      }
      K3_CHECK(e.time_us >= now_us_, "time went back from {} us to {} us", now_us_, e.time_us);
      now_us_ = e.time_us;
      sample_queues();
      switch (e.kind) {
        case EventKind::arrival: arrive(e.id); break;
        case EventKind::iteration_end: end_iteration(static_cast<int>(e.id)); break;
        case EventKind::transfer_done: hand_over(e.id); break;
      }
    }
    if (o_.progress) o_.progress(result_.completed + result_.rejected, n);
    finish_metrics();
    return std::move(result_);
  }

 private:
  double reserve_for(const Replica& r, const Seq& s) const {
    const double tokens = r.role == Role::prefill ? double(s.prompt()) : double(s.prompt() + s.output);
    return r.model->sequence_bytes(tokens);
  }

  int least_loaded(Role role) const {
    int best = -1;
    for (int i = 0; i < static_cast<int>(replicas_.size()); ++i) {
      if (replicas_[i].role != role) continue;
      if (best < 0 || replicas_[i].load() < replicas_[best].load()) best = i;
    }
    return best;
  }

  void reject(int64_t id, Rejection why) {
    result_.requests[id].rejected = true;
    result_.requests[id].rejection = why;
    result_.rejected += 1;
    result_.rejected_by[static_cast<int>(why)] += 1;
  }

  void arrive(int64_t id) {
    Seq& s = seqs_[id];
    const int ri = least_loaded(o_.disaggregated ? Role::prefill : Role::both);
    Replica& r = replicas_[ri];
    if (r.model->max_positions > 0 && s.prompt() + s.output > r.model->max_positions) {
      return reject(id, Rejection::beyond_positions);
    }
    const bool never_fits = reserve_for(r, s) > r.group_capacity ||
                            (o_.disaggregated && replicas_.back().model->sequence_bytes(double(s.prompt() + s.output)) >
                                                     replicas_.back().group_capacity);
    if (never_fits) return reject(id, Rejection::memory);
    if (o_.admission == Admission::slo && o_.slo.ttft_ms > 0) {
      const double ahead_us = (r.busy ? r.busy_until_us - now_us_ : 0.0) +
                              double(r.queued_prefill_tokens + s.prompt_new) * r.prefill_us_per_token;
      if (ahead_us > o_.slo.ttft_ms * 1000.0) return reject(id, Rejection::ttft_admission);
    }
    s.replica = ri;
    r.waiting.push_back(id);
    r.queued_prefill_tokens += s.prompt_new;
    try_start(ri);
  }

  // Decode step time of the replica's decoding sequences plus `extra` (TPOT admission check).
  double decode_step_with(const Replica& r, const Seq& extra) const {
    BatchShape b;
    for (int64_t id : r.running) {
      const Seq& s = seqs_[id];
      if (s.prefilled == s.prompt_new)
        b.add_decode(double(s.prompt() + s.produced - 1));
      else
        b.add_decode(double(s.prompt()));  // it will decode soon
    }
    b.add_decode(double(extra.prompt()));
    return r.model->step.step_us(b);
  }

  // Replica `ri` as its scheduler sees it: admission and the iteration's batch go through here.
  class Queue : public ReplicaQueue {
   public:
    Queue(Simulation& sim, int ri) : sim_(sim), ri_(ri), r_(sim.replicas_[ri]) {}
    const std::deque<int64_t>& waiting() const override { return r_.waiting; }
    const std::vector<int64_t>& running() const override { return r_.running; }
    const SequenceState& sequence(int64_t id) const override { return sim_.seqs_.at(id); }
    const BatchLimits& limits() const override { return r_.limits; }
    bool admit(int64_t id) override {
      auto it = std::find(r_.waiting.begin(), r_.waiting.end(), id);
      K3_CHECK(it != r_.waiting.end(), "scheduler admitted request {}, which does not wait on replica {}", id, ri_);
      Seq& s = sim_.seqs_[id];
      const double need = sim_.reserve_for(r_, s);
      if (r_.reserved + need > r_.capacity) return false;
      const ServingOptions& o = sim_.o_;
      if (o.admission == Admission::slo && o.slo.tpot_ms > 0 && r_.role != Role::prefill && !r_.running.empty() &&
          sim_.decode_step_with(r_, s) > o.slo.tpot_ms * 1000.0) {
        return false;
      }
      r_.waiting.erase(it);
      s.reserved = need;
      s.replica = ri_;
      r_.reserved += need;
      K3_CHECK(r_.reserved <= r_.capacity * (1 + 1e-12), "replica {} holds {} B of {} B", ri_, r_.reserved,
               r_.capacity);
      sim_.result_.max_memory_fraction = std::max(sim_.result_.max_memory_fraction, r_.reserved / r_.capacity);
      r_.running.push_back(id);
      s.running = true;
      RequestOutcome& out = sim_.result_.requests[id];
      if (r_.role == Role::decode) {
        out.decode_replica = ri_;
        out.decode_admitted_ms = sim_.now_us_ / 1000.0;
      } else {
        out.replica = ri_;
        out.admitted_ms = sim_.now_us_ / 1000.0;
      }
      return true;
    }
    void add_decode(int64_t id) override {
      const Seq& s = running_seq(id);
      K3_CHECK(s.decoding(), "scheduler decodes request {}, which is not decoding", id);
      shape.add_decode(double(s.prompt() + s.produced - 1));
      r_.batch.emplace_back(id, 0);
    }
    void add_prefill(int64_t id, int64_t tokens) override {
      const Seq& s = running_seq(id);
      K3_CHECK(tokens > 0 && s.prefilled + tokens <= s.prompt_new,
               "scheduler prefills {} tokens of request {} ({} of {} done)", tokens, id, s.prefilled, s.prompt_new);
      shape.add_prefill(double(tokens), double(s.cached + s.prefilled));
      r_.batch.emplace_back(id, tokens);
    }
    BatchShape shape;

   private:
    const Seq& running_seq(int64_t id) const {
      const Seq& s = sim_.seqs_.at(id);
      K3_CHECK(s.running && s.replica == ri_, "scheduler batches request {}, which does not run on replica {}", id,
               ri_);
      return s;
    }
    Simulation& sim_;
    int ri_;
    Replica& r_;
  };

  void try_start(int ri) {
    Replica& r = replicas_[ri];
    if (r.busy) return;
    r.batch.clear();
    Queue queue(*this, ri);
    scheduler_->schedule(queue);
    if (r.batch.empty()) return;
    const BatchShape& shape = queue.shape;
    K3_CHECK(shape.tokens() <= r.limits.max_batched_tokens &&
                 static_cast<int64_t>(r.running.size()) <= r.limits.max_sequences,
             "scheduler exceeded the batch limits on replica {}", ri);
    const double dur = r.model->step.step_us(shape);
    K3_CHECK(dur > 0, "iteration of {} tokens takes no time", shape.tokens());
    r.busy = true;
    r.busy_until_us = now_us_ + dur;
    r.busy_us += dur;
    result_.iterations += 1;
    if (o_.record_schedule) {
      IterationRecord it{ri, now_us_ / 1000.0, (now_us_ + dur) / 1000.0, 0, 0, 0};
      for (const auto& [id, chunk] : r.batch) {
        if (chunk > 0) {
          it.prefill_sequences += 1;
          it.prefill_tokens += chunk;
        } else {
          it.decode_sequences += 1;
        }
      }
      result_.schedule.push_back(it);
    }
    events_.push({now_us_ + dur, EventKind::iteration_end, ri});
  }

  void release(Replica& r, Seq& s) {
    r.reserved = std::max(0.0, r.reserved - s.reserved);
    s.reserved = 0;
  }

  void complete(int64_t id) {
    result_.requests[id].finish_ms = now_us_ / 1000.0;
    result_.completed += 1;
  }

  void end_iteration(int ri) {
    Replica& r = replicas_[ri];
    r.busy = false;
    std::vector<int64_t> leaving;
    for (auto [id, chunk] : r.batch) {
      Seq& s = seqs_[id];
      if (chunk > 0) {
        s.prefilled += chunk;
        r.queued_prefill_tokens -= chunk;
        result_.prefill_tokens += chunk;
        if (s.prefilled < s.prompt_new) continue;
        s.produced = 1;  // the last chunk's logits give the first token
        result_.requests[id].first_token_ms = now_us_ / 1000.0;
        if (s.produced == s.output) {
          complete(id);
          release(r, s);
          leaving.push_back(id);
        } else if (r.role == Role::prefill) {
          // Hand the KV and state to a decode replica; the prefill side holds them until it is done.
          const double bytes = r.model->sequence_bytes(double(s.prompt()));
          events_.push({now_us_ + r.model->transfer_latency_us + bytes * r.model->transfer_us_per_byte,
                        EventKind::transfer_done, id});
          in_transfer_ += 1;
          leaving.push_back(id);
        }
      } else {
        s.produced += 1;
        result_.decode_tokens += 1;
        if (s.produced == s.output) {
          complete(id);
          release(r, s);
          leaving.push_back(id);
        }
      }
    }
    if (!leaving.empty()) {
      for (int64_t id : leaving) seqs_[id].running = false;
      std::sort(leaving.begin(), leaving.end());
      std::erase_if(r.running, [&](int64_t id) { return std::binary_search(leaving.begin(), leaving.end(), id); });
    }
    try_start(ri);
  }

  void hand_over(int64_t id) {
    Seq& s = seqs_[id];
    const int from = s.replica;
    release(replicas_[from], s);
    in_transfer_ -= 1;
    try_start(from);
    const int to = least_loaded(Role::decode);
    s.replica = to;
    result_.requests[id].handoff_ms = now_us_ / 1000.0;
    replicas_[to].waiting.push_back(id);
    try_start(to);
  }

  void sample_queues() {
    if (o_.queue_sample_interval_ms <= 0) return;
    while (now_us_ >= next_sample_us_) {
      QueueSample q;
      q.time_ms = next_sample_us_ / 1000.0;
      q.waiting = in_transfer_;
      for (const Replica& r : replicas_) {
        q.waiting += static_cast<int64_t>(r.waiting.size());
        q.running += static_cast<int64_t>(r.running.size());
        q.memory_fraction = std::max(q.memory_fraction, r.reserved / r.capacity);
      }
      if (result_.queue.size() >= static_cast<std::size_t>(limit::queue_samples.value)) {
        throw InputError(fmt::format(
            "serving.queue_sample_interval_ms: {:g} ms gives more than {:.0f} queue samples by {:.0f} ms of simulated "
            "time (the limit on {}); take a longer interval",
            o_.queue_sample_interval_ms, limit::queue_samples.value, q.time_ms, limit::queue_samples.what));
      }
      result_.queue.push_back(q);
      next_sample_us_ += o_.queue_sample_interval_ms * 1000.0;
    }
  }

  void finish_metrics() {
    ServingResult& res = result_;
    std::vector<double> ttft, tpot, e2e;
    double first_ms = 0, last_ms = 0, output_tokens = 0, good_tokens = 0, speed_sum = 0;
    int64_t speed_n = 0, prompt_computed = 0, decoded = 0;
    if (!requests_.empty()) first_ms = last_ms = requests_.front().arrival_ms;
    for (std::size_t i = 0; i < res.requests.size(); ++i) {
      const RequestOutcome& q = res.requests[i];
      if (q.rejected) continue;
      K3_CHECK(q.finish_ms >= q.first_token_ms && q.first_token_ms >= q.arrival_ms,
               "request {} did not complete in order (arrival {}, first token {}, finish {})", q.id, q.arrival_ms,
               q.first_token_ms, q.finish_ms);
      prompt_computed += seqs_[i].prompt_new;
      decoded += q.output_tokens - 1;
      last_ms = std::max(last_ms, q.finish_ms);
      ttft.push_back(q.ttft_ms());
      e2e.push_back(q.e2e_ms());
      output_tokens += double(q.output_tokens);
      if (q.output_tokens > 1) {
        tpot.push_back(q.tpot_ms());
        if (q.tpot_ms() > 0) {
          speed_sum += 1000.0 / q.tpot_ms();
          speed_n += 1;
        }
      }
      const bool met = (o_.slo.ttft_ms <= 0 || q.ttft_ms() <= o_.slo.ttft_ms) &&
                       (o_.slo.tpot_ms <= 0 || q.tpot_ms() <= o_.slo.tpot_ms);
      if (met) {
        res.met_slo += 1;
        good_tokens += double(q.output_tokens);
      }
    }
    // Every admitted token was computed exactly once.
    K3_CHECK(res.completed + res.rejected == static_cast<int64_t>(res.requests.size()),
             "{} completed + {} rejected of {} requests", res.completed, res.rejected, res.requests.size());
    K3_CHECK(prompt_computed == res.prefill_tokens, "prompt tokens: {} to compute, {} computed", prompt_computed,
             res.prefill_tokens);
    K3_CHECK(decoded == res.decode_tokens, "output tokens: {} to decode, {} decoded", decoded, res.decode_tokens);
    res.ttft_ms = percentiles(ttft);
    res.tpot_ms = percentiles(tpot);
    res.e2e_ms = percentiles(e2e);
    res.duration_ms = last_ms - first_ms;
    const double seconds = res.duration_ms / 1000.0;
    if (seconds > 0) {
      res.output_tokens_per_s = output_tokens / seconds;
      res.goodput_requests_per_s = double(res.met_slo) / seconds;
      res.goodput_tokens_per_s = good_tokens / seconds;
      res.tokens_per_s_per_gpu = res.output_tokens_per_s / res.gpus;
    }
    res.tokens_per_s_per_user = speed_n > 0 ? speed_sum / double(speed_n) : 0.0;
    for (const Replica& r : replicas_) {
      res.utilisation.push_back(res.duration_ms > 0 ? r.busy_us / (res.duration_ms * 1000.0) : 0.0);
    }
  }

  const std::vector<workload::Request>& requests_;
  const ServingOptions& o_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<Replica> replicas_;
  std::vector<Seq> seqs_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  ServingResult result_;
  double now_us_ = 0;
  double next_sample_us_ = 0;
  int64_t in_transfer_ = 0;
};

}  // namespace

ServingResult simulate(const std::vector<workload::Request>& requests, const std::vector<int64_t>& cached,
                       const ReplicaModel& replica, const ServingOptions& options) {
  return simulate(requests, cached, replica, replica, options);
}

ServingResult simulate(const std::vector<workload::Request>& requests, const std::vector<int64_t>& cached,
                       const ReplicaModel& prefill_replica, const ReplicaModel& decode_replica,
                       const ServingOptions& options) {
  return Simulation(requests, cached, prefill_replica, decode_replica, options).run();
}

}  // namespace k3::serving
