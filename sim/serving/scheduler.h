// How a replica forms its next iteration (docs/serving.md#schedulers): which waiting sequences join
// its running batch, and which decode tokens and prefill chunks the iteration computes. The
// simulation calls the scheduler whenever the replica is idle and then times exactly the batch it
// formed. A scheduler is one .cpp file in sim/serving/ ending in
// K3PERF_REGISTER_SCHEDULER(Class, "name"), chosen by `serving.scheduler` (default `fcfs`); one with
// parameters reads them in its constructor from a Params (core/registry.h).
#pragma once

#include "core/registry.h"

#include <cstdint>
#include <deque>
#include <vector>

namespace k3::serving {

struct BatchLimits {
  int64_t max_sequences = 256;        // sequences in one replica's running batch
  int64_t max_batched_tokens = 8192;  // tokens per iteration: each decode takes 1, prefill chunks the rest
};

// One request as the scheduler sees it.
struct SequenceState {
  int64_t prompt_new = 0;  // prompt tokens to compute
  int64_t cached = 0;      // prompt tokens loaded from the prefix cache
  int64_t prefilled = 0;
  int64_t output = 1;
  int64_t produced = 0;
  int64_t prompt() const { return cached + prompt_new; }
  bool prefilling() const { return prefilled < prompt_new; }
  bool decoding() const { return prefilled == prompt_new && produced < output; }
};

// One replica, as the simulation lends it to the scheduler for one iteration.
class ReplicaQueue {
 public:
  virtual ~ReplicaQueue() = default;
  virtual const std::deque<int64_t>& waiting() const = 0;   // in arrival order
  virtual const std::vector<int64_t>& running() const = 0;  // in admission order
  virtual const SequenceState& sequence(int64_t id) const = 0;
  virtual const BatchLimits& limits() const = 0;
  // Moves waiting sequence `id` into the running batch, reserving its memory, when the memory
  // holds it (and, under SLO admission, the decode step stays within the TPOT SLO); else false.
  virtual bool admit(int64_t id) = 0;
  // Adds to the iteration one decode token of a decoding sequence, or `tokens` of its prompt.
  virtual void add_decode(int64_t id) = 0;
  virtual void add_prefill(int64_t id, int64_t tokens) = 0;
};

class Scheduler {
 public:
  static constexpr const char* kind = "scheduler";
  virtual ~Scheduler() = default;
  // Admits sequences and forms the iteration; an iteration left empty leaves the replica idle.
  // Deterministic.
  virtual void schedule(ReplicaQueue& replica) const = 0;
};

using Schedulers = Registry<Scheduler>;

#define K3PERF_REGISTER_SCHEDULER(Class, name) K3PERF_REGISTER(::k3::serving::Scheduler, Class, name)

}  // namespace k3::serving
