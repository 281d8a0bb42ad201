#include "sim/workload/mooncake_reader.h"

#include "core/error.h"
#include "core/json_reader.h"
#include "core/limits.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string_view>

namespace k3::workload {
namespace {

// A non-negative integer within `limit`.
int64_t field(const nlohmann::json& j, const char* key, const std::string& where, const IntLimit& limit) {
  auto it = j.find(key);
  if (it == j.end()) throw InputError(fmt::format("{}: key '{}': missing", where, key));
  if (!it->is_number_integer() || (!it->is_number_unsigned() && it->get<int64_t>() < 0)) {
    throw InputError(
        fmt::format("{}: key '{}': expected a non-negative integer, got {}", where, key, quoted_excerpt(it->dump())));
  }
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(limit.max)) {
    throw InputError(
        fmt::format("{}: key '{}': {} exceeds {}, the limit on {}", where, key, it->dump(), limit.max, limit.what));
  }
  const int64_t v = it->get<int64_t>();
  if (v > limit.max) throw InputError(fmt::format("{}: key '{}': {}", where, key, exceeds(v, limit)));
  return v;
}

// Milliseconds since the trace's start: any non-negative integer a double holds exactly.
constexpr IntLimit kTimestampMs{"timestamp", 0, int64_t{1} << 53, "Mooncake timestamp"};

// What the requests read so far hold: limit::requests of them, limit::input_memory of bytes.
struct Held {
  std::vector<Request> requests;
  double hash_bytes = 0;
  double bytes() const { return double(requests.size()) * sizeof(Request) + hash_bytes; }
};

// One line's request, appended to `held` (blank lines add nothing).
void parse_line(std::string_view line, const std::string& origin, int64_t line_number, int64_t block_tokens,
                Held& held) {
  std::vector<Request>& out = held.requests;
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;
  const std::string where = fmt::format("{}:{}", origin, line_number);
  if (static_cast<long long>(out.size()) >= limit::requests.max) {
    throw InputError(fmt::format("{}: a request beyond the first {}: {}", where, limit::requests.max,
                                 exceeds(static_cast<long long>(out.size()) + 1, limit::requests)));
  }
  const nlohmann::json j = parse_json(line, where);
  if (!j.is_object()) throw InputError(fmt::format("{}: expected a JSON object per line", where));
  Request r;
  r.id = static_cast<int64_t>(out.size());
  r.arrival_ms = static_cast<double>(field(j, "timestamp", where, kTimestampMs));
  r.input_tokens = field(j, "input_length", where, limit::tokens);
  r.output_tokens = field(j, "output_length", where, limit::tokens);
  auto hashes = j.find("hash_ids");
  if (hashes == j.end() || !hashes->is_array()) {
    throw InputError(fmt::format("{}: key 'hash_ids': expected a list of block hashes", where));
  }
  r.block_hashes.reserve(hashes->size());
  for (const auto& h : *hashes) {
    if (!h.is_number_integer() || (!h.is_number_unsigned() && h.get<int64_t>() < 0)) {
      throw InputError(
          fmt::format("{}: key 'hash_ids': expected non-negative integers, got {}", where, quoted_excerpt(h.dump())));
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
  held.hash_bytes += double(blocks) * sizeof(uint64_t);
  if (held.bytes() > limit::input_memory.value) {
    throw InputError(fmt::format("{}: the requests up to here hold {:.1f} GB, more than {:.1f} GB, the limit on {}",
                                 where, held.bytes() / 1e9, limit::input_memory.value / 1e9, limit::input_memory.what));
  }
  if (!out.empty() && r.arrival_ms < out.back().arrival_ms) {
    throw InputError(
        fmt::format("{}: key 'timestamp': {} is earlier than the previous line's {}; the trace must "
                    "be in arrival order",
                    where, r.arrival_ms, out.back().arrival_ms));
  }
  out.push_back(std::move(r));
}

}  // namespace

std::vector<Request> parse_mooncake_trace(const std::string& text, const std::string& origin, int64_t block_tokens) {
  K3_CHECK(block_tokens > 0, "block_tokens must be positive, got {}", block_tokens);
  Held held;
  std::size_t begin = 0;
  int64_t line_number = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    parse_line(std::string_view(text.data() + begin, end - begin), origin, ++line_number, block_tokens, held);
    begin = end + 1;
  }
  return std::move(held.requests);
}

// Line by line: a trace of millions of requests is never held as text beside its requests.
std::vector<Request> read_mooncake_trace(const std::string& path, int64_t block_tokens) {
  K3_CHECK(block_tokens > 0, "block_tokens must be positive, got {}", block_tokens);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError(fmt::format("{}: is a directory, not a file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open file", path));
  Held held;
  int64_t line_number = 0;
  for (std::string line; std::getline(in, line);) parse_line(line, path, ++line_number, block_tokens, held);
  if (in.bad()) throw InputError(fmt::format("{}: read error after line {}", path, line_number));
  return std::move(held.requests);
}

}  // namespace k3::workload
