#include "sim/comm/nccl_table.h"

#include "core/error.h"
#include "core/hardware.h"
#include "core/limits.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace k3 {

double NcclSample::busbw_bytes_per_s() const { return algbw_bytes_per_s() * nccl_bus_factor(collective, group_size); }

namespace {

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, ',')) {
    const auto b = field.find_first_not_of(" \t\r");
    const auto e = field.find_last_not_of(" \t\r");
    out.push_back(b == std::string::npos ? "" : field.substr(b, e - b + 1));
  }
  return out;
}

double parse_number(const std::string& text, const std::string& where) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || !(v > 0) || !std::isfinite(v)) {
    throw InputError(fmt::format("{}: expected a positive number, got '{}'", where, quoted_excerpt(text)));
  }
  return v;
}

}  // namespace

std::vector<NcclSample> parse_nccl_table(const std::string& text, const std::string& origin) {
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  std::vector<std::string> header;
  int col_collective = -1, col_group = -1, col_size = -1, col_time = -1;
  std::vector<NcclSample> out;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> fields = split_csv_line(line);
    if (header.empty()) {
      header = fields;
      for (int i = 0; i < static_cast<int>(header.size()); ++i) {
        if (header[i] == "collective") col_collective = i;
        if (header[i] == "group_size") col_group = i;
        if (header[i] == "size_bytes") col_size = i;
        if (header[i] == "time_us") col_time = i;
      }
      if (col_collective < 0 || col_group < 0 || col_size < 0 || col_time < 0) {
        throw InputError(fmt::format("{}:{}: expected a header with collective,group_size,size_bytes,time_us; got '{}'",
                                     origin, line_no, line));
      }
      continue;
    }
    if (fields.size() != header.size()) {
      throw InputError(
          fmt::format("{}:{}: {} fields, the header has {}", origin, line_no, fields.size(), header.size()));
    }
    NcclSample s;
    s.collective = fields[col_collective];
    const std::string where = fmt::format("{}:{}", origin, line_no);
    try {
      nccl_bus_factor(s.collective, 2);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: column 'collective': {}", where, e.what()));
    }
    const double n = parse_number(fields[col_group], where + ": column 'group_size'");
    if (n > double(limit::gpus.max)) {
      throw InputError(fmt::format("{}: column 'group_size': {} exceeds {}, the limit on {}", where,
                                   quoted_excerpt(fields[col_group]), limit::gpus.max, limit::gpus.what));
    }
    if (n < 2 || n != std::floor(n)) {
      throw InputError(fmt::format("{}: column 'group_size': expected an integer >= 2, got '{}'", where,
                                   quoted_excerpt(fields[col_group])));
    }
    s.group_size = static_cast<int>(n);
    s.size_bytes = parse_number(fields[col_size], where + ": column 'size_bytes'");
    s.time_us = parse_number(fields[col_time], where + ": column 'time_us'");
    out.push_back(s);
  }
  if (out.empty()) throw InputError(fmt::format("{}: no samples", origin));
  return out;
}

std::vector<NcclSample> load_nccl_table(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot read the NCCL table", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_nccl_table(ss.str(), path);
}

std::string to_csv(const std::vector<NcclSample>& samples) {
  std::string out = "collective,group_size,size_bytes,time_us,algbw_gb_s,busbw_gb_s\n";
  for (const NcclSample& s : samples) {
    out += fmt::format("{},{},{:.0f},{:.4f},{:.4f},{:.4f}\n", s.collective, s.group_size, s.size_bytes, s.time_us,
                       s.algbw_bytes_per_s() / 1e9, s.busbw_bytes_per_s() / 1e9);
  }
  return out;
}

std::vector<NcclSample> select_samples(const std::vector<NcclSample>& all, const std::string& collective, int n) {
  std::vector<NcclSample> out;
  for (const NcclSample& s : all) {
    if (s.collective == collective && s.group_size == n) out.push_back(s);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const NcclSample& a, const NcclSample& b) { return a.size_bytes < b.size_bytes; });
  return out;
}

}  // namespace k3
