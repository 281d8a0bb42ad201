#include "sim/workload/mooncake_reader.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_reader.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <string_view>

namespace k3::workload {
namespace {

int64_t field(const nlohmann::json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) throw InputError(fmt::format("{}: key '{}': missing", where, key));
  if (!it->is_number_integer() || it->get<int64_t>() < 0) {
    throw InputError(fmt::format("{}: key '{}': expected a non-negative integer, got {}", where, key, it->dump()));
  }
  return it->get<int64_t>();
}

}  // namespace

std::vector<Request> parse_mooncake_trace(const std::string& text, const std::string& origin, int64_t block_tokens) {
  K3_CHECK(block_tokens > 0, "block_tokens must be positive, got {}", block_tokens);
  std::vector<Request> out;
  std::size_t begin = 0;
  int line_number = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + begin, end - begin);
    begin = end + 1;
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = fmt::format("{}:{}", origin, line_number);
    const nlohmann::json j = parse_json(line, where);
    if (!j.is_object()) throw InputError(fmt::format("{}: expected a JSON object per line", where));
    Request r;
    r.id = static_cast<int64_t>(out.size());
    r.arrival_ms = static_cast<double>(field(j, "timestamp", where));
    r.input_tokens = field(j, "input_length", where);
    r.output_tokens = field(j, "output_length", where);
    auto hashes = j.find("hash_ids");
    if (hashes == j.end() || !hashes->is_array()) {
      throw InputError(fmt::format("{}: key 'hash_ids': expected a list of block hashes", where));
    }
    r.block_hashes.reserve(hashes->size());
    for (const auto& h : *hashes) {
      if (!h.is_number_integer() || h.get<int64_t>() < 0) {
        throw InputError(fmt::format("{}: key 'hash_ids': expected non-negative integers, got {}", where, h.dump()));
      }
      r.block_hashes.push_back(h.get<uint64_t>());
    }
    const int64_t blocks = static_cast<int64_t>(r.block_hashes.size());
    const int64_t expected = (r.input_tokens + block_tokens - 1) / block_tokens;
    if (blocks != expected) {
      throw InputError(
          fmt::format("{}: key 'hash_ids': {} hashes do not cover input_length {} in blocks of {} tokens "
                      "(expected {})",
                      where, blocks, r.input_tokens, block_tokens, expected));
    }
    r.block_tokens = blocks > 0 ? block_tokens : 0;
    if (!out.empty() && r.arrival_ms < out.back().arrival_ms) {
      throw InputError(
          fmt::format("{}: key 'timestamp': {} is earlier than the previous line's {}; the trace must "
                      "be in arrival order",
                      where, r.arrival_ms, out.back().arrival_ms));
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<Request> read_mooncake_trace(const std::string& path, int64_t block_tokens) {
  return parse_mooncake_trace(read_file(path), path, block_tokens);
}

}  // namespace k3::workload
