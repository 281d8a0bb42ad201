#include "sim/workload/azure_reader.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/limits.h"

#include <fmt/format.h>

#include <charconv>
#include <string_view>

namespace k3::workload {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// A token count: a non-negative integer within limit::tokens, as the Mooncake reader and the YAML files take it.
int64_t parse_count(std::string_view s, const std::string& where, const char* column) {
  s = trim(s);
  int64_t v = -1;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range ||
      (ec == std::errc() && p == s.data() + s.size() && v > limit::tokens.max)) {
    throw InputError(fmt::format("{}: column '{}': {} exceeds {}, the limit on {}", where, column, quoted_excerpt(s),
                                 limit::tokens.max, limit::tokens.what));
  }
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) {
    throw InputError(
        fmt::format("{}: column '{}': expected a non-negative integer, got '{}'", where, column, quoted_excerpt(s)));
  }
  return v;
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// "YYYY-MM-DD HH:MM:SS[.fraction]" -> milliseconds since the epoch (no time zone: differences only).
double parse_timestamp_ms(std::string_view s, const std::string& where) {
  s = trim(s);
  auto fail = [&]() -> double {
    throw InputError(fmt::format("{}: column 'TIMESTAMP': expected 'YYYY-MM-DD HH:MM:SS.fraction', got '{}'", where,
                                 quoted_excerpt(s)));
  };
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || s[10] != ' ' || s[13] != ':' || s[16] != ':') return fail();
  auto num = [&](std::size_t pos, std::size_t len) {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data() + pos, s.data() + pos + len, v);
    if (ec != std::errc() || p != s.data() + pos + len) fail();
    return v;
  };
  const int64_t year = num(0, 4), month = num(5, 2), day = num(8, 2);
  const int64_t hour = num(11, 2), minute = num(14, 2), second = num(17, 2);
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return fail();
  double fraction_s = 0;
  if (s.size() > 19) {
    if (s[19] != '.' || s.size() == 20) return fail();
    double scale = 0.1;
    for (std::size_t i = 20; i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9') return fail();
      fraction_s += (s[i] - '0') * scale;
      scale /= 10;
    }
  }
  const double seconds =
      double(days_from_civil(year, month, day)) * 86400.0 + double(hour * 3600 + minute * 60 + second);
  return (seconds + fraction_s) * 1000.0;
}

}  // namespace

std::vector<Request> parse_azure_trace(const std::string& text, const std::string& origin) {
  std::vector<Request> out;
  std::size_t begin = 0;
  int line_number = 0;
  bool header_seen = false;
  double first_ms = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string_view line = trim(std::string_view(text.data() + begin, end - begin));
    begin = end + 1;
    ++line_number;
    if (line.empty()) continue;
    const std::string where = fmt::format("{}:{}", origin, line_number);
    if (!header_seen) {
      if (line != "TIMESTAMP,ContextTokens,GeneratedTokens") {
        throw InputError(fmt::format("{}: expected the header 'TIMESTAMP,ContextTokens,GeneratedTokens', got '{}'",
                                     where, quoted_excerpt(line)));
      }
      header_seen = true;
      continue;
    }
    const std::size_t c1 = line.find(',');
    const std::size_t c2 = c1 == std::string_view::npos ? c1 : line.find(',', c1 + 1);
    if (c2 == std::string_view::npos || line.find(',', c2 + 1) != std::string_view::npos) {
      throw InputError(fmt::format("{}: expected 3 comma-separated columns, got '{}'", where, quoted_excerpt(line)));
    }
    if (static_cast<long long>(out.size()) >= limit::requests.max) {
      throw InputError(fmt::format("{}: a request beyond the first {}: {}", where, limit::requests.max,
                                   exceeds(static_cast<long long>(out.size()) + 1, limit::requests)));
    }
    const double t_ms = parse_timestamp_ms(line.substr(0, c1), where);
    Request r;
    r.id = static_cast<int64_t>(out.size());
    if (out.empty()) first_ms = t_ms;
    r.arrival_ms = t_ms - first_ms;
    r.input_tokens = parse_count(line.substr(c1 + 1, c2 - c1 - 1), where, "ContextTokens");
    r.output_tokens = parse_count(line.substr(c2 + 1), where, "GeneratedTokens");
    if (!out.empty() && r.arrival_ms < out.back().arrival_ms) {
      throw InputError(
          fmt::format("{}: column 'TIMESTAMP': earlier than the previous row; the trace must be in "
                      "arrival order",
                      where));
    }
    out.push_back(r);
  }
  if (!header_seen) throw InputError(fmt::format("{}: empty file; expected the Azure CSV header", origin));
  return out;
}

std::vector<Request> read_azure_trace(const std::string& path) { return parse_azure_trace(read_file(path), path); }

}  // namespace k3::workload
