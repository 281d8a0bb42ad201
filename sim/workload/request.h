// A request as the cache and serving simulators see it: when it arrives, how long its prompt and
// its answer are, and — where the trace says — which prompt blocks it shares with earlier requests.
// Filled by the trace readers (Mooncake JSONL, Azure CSV) and the synthetic generators of
// sim/workload/; every field in the units its name gives.
#pragma once

#include <cstdint>
#include <vector>

namespace k3::workload {

struct Request {
  int64_t id = 0;             // 0-based position in arrival order
  double arrival_ms = 0;      // since the trace's start
  int64_t input_tokens = 0;   // prompt length
  int64_t output_tokens = 0;  // generated length
  // Prefix-chained hashes of the prompt's blocks of `block_tokens` tokens (Mooncake: 512): equal
  // hashes at position i mean equal prompts up to the end of block i. Empty when the trace has none.
  std::vector<uint64_t> block_hashes;
  int64_t block_tokens = 0;  // tokens per hashed block; 0 when block_hashes is empty
  int64_t session_id = -1;   // conversation or agent session where known, else -1
};

}  // namespace k3::workload
