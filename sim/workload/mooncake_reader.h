// Reads a Mooncake request trace (JSON Lines, as published in kvcache-ai/Mooncake FAST25-release):
// one object per line with `timestamp` (ms since the trace's start), `input_length`, `output_length`
// and `hash_ids` — remapped prefix-chained hashes of the prompt's blocks of `block_tokens` tokens
// (512 in the published traces; the last block may be partial).
#pragma once

#include "sim/workload/request.h"

#include <string>
#include <vector>

namespace k3::workload {

inline constexpr int64_t kMooncakeBlockTokens = 512;

// Requests in file order (the published traces are sorted by timestamp; an earlier timestamp after a
// later one is an error). Errors name the file, the line and the key: a malformed line, a missing or
// negative field, or a hash count that does not cover `input_length` in blocks of `block_tokens`.
std::vector<Request> read_mooncake_trace(const std::string& path, int64_t block_tokens = kMooncakeBlockTokens);
std::vector<Request> parse_mooncake_trace(const std::string& text, const std::string& origin,
                                          int64_t block_tokens = kMooncakeBlockTokens);

}  // namespace k3::workload
