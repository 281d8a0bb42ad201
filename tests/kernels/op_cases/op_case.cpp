#include "tests/kernels/op_cases/op_case.h"

#include "core/error.h"

#include <cmath>

namespace k3::gpu_test {

int64_t Shape::operator[](const std::string& name) const {
  for (const auto& [key, value] : dims) {
    if (key == name) return value;
  }
  throw Error(fmt::format("op case shape '{}' has no dimension '{}'", text(), name));
}

std::string Shape::label() const {
  std::string out;
  for (const auto& [key, value] : dims) {
    if (!out.empty()) out += '_';
    out += value < 0 ? fmt::format("{}m{}", key, -value) : fmt::format("{}{}", key, value);
  }
  return out;
}

std::string Shape::text() const {
  std::string out;
  for (const auto& [key, value] : dims) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", key, value);
  return out;
}

std::mt19937 case_rng(const std::string& case_name, const Shape& s) {
  const std::string key = case_name + "/" + s.label();
  std::seed_seq seed(key.begin(), key.end());
  return std::mt19937(seed);
}

void Checks::near(const std::string& what, double error, double tolerance) {
  const bool ok = std::isfinite(error) && error <= tolerance;
  checks_.push_back({what, ok, fmt::format("normalised error {:.3g}, tolerance {:.3g}", error, tolerance)});
}

void Checks::expect(bool ok, const std::string& what, const std::string& detail) {
  checks_.push_back({what, ok, detail});
}

void Checks::none(const std::string& what, int64_t count) {
  checks_.push_back({what, count == 0, fmt::format("{} mismatches", count)});
}

}  // namespace k3::gpu_test
