#include "core/json_reader.h"

#include "core/error.h"

#include <cmath>
#include <memory>

namespace k3 {

JsonNode JsonNode::parse(const std::string& text, const std::string& origin) {
  auto doc = std::make_shared<nlohmann::json>();
  try {
    *doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(fmt::format("{}: malformed JSON at byte {}: {}", origin, e.byte, e.what()));
  }
  if (!doc->is_object()) throw InputError(fmt::format("{}: expected a JSON object at the top level", origin));
  JsonNode node(doc.get(), origin, "");
  node.owner_ = doc;
  return node;
}

JsonNode::JsonNode(const nlohmann::json* value, std::string file, std::string key_path)
    : value_(value), file_(std::move(file)), key_path_(std::move(key_path)) {}

void JsonNode::fail(const std::string& what) const {
  if (key_path_.empty()) throw InputError(fmt::format("{}: {}", file_, what));
  throw InputError(fmt::format("{}: key '{}': {}", file_, key_path_, what));
}

bool JsonNode::has(const std::string& key) const {
  return value_->is_object() && value_->contains(key) && !(*value_)[key].is_null();
}

std::optional<JsonNode> JsonNode::find(const std::string& key) const {
  if (!value_->is_object()) fail("expected an object");
  if (!has(key)) return std::nullopt;
  JsonNode child(&(*value_)[key], file_, key_path_.empty() ? key : key_path_ + "." + key);
  child.owner_ = owner_;
  return child;
}

JsonNode JsonNode::operator[](const std::string& key) const {
  std::optional<JsonNode> child = find(key);
  if (!child) {
    throw InputError(
        fmt::format("{}: missing required key '{}'", file_, key_path_.empty() ? key : key_path_ + "." + key));
  }
  return *child;
}

long long JsonNode::as_int() const {
  if (value_->is_number_integer()) return value_->get<long long>();
  if (value_->is_number_float()) {
    const double d = value_->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) return static_cast<long long>(d);
  }
  fail(fmt::format("expected an integer, got {}", value_->dump()));
}

long long JsonNode::as_positive_int() const {
  const long long v = as_int();
  if (v <= 0) fail(fmt::format("expected a positive integer, got {}", v));
  return v;
}

long long JsonNode::as_non_negative_int() const {
  const long long v = as_int();
  if (v < 0) fail(fmt::format("expected an integer >= 0, got {}", v));
  return v;
}

double JsonNode::as_double() const {
  if (!value_->is_number()) fail(fmt::format("expected a number, got {}", value_->dump()));
  return value_->get<double>();
}

bool JsonNode::as_bool() const {
  if (!value_->is_boolean()) fail(fmt::format("expected true or false, got {}", value_->dump()));
  return value_->get<bool>();
}

std::string JsonNode::as_string() const {
  if (!value_->is_string()) fail(fmt::format("expected a string, got {}", value_->dump()));
  return value_->get<std::string>();
}

std::vector<long long> JsonNode::as_int_list() const {
  if (!value_->is_array()) fail(fmt::format("expected a list of integers, got {}", value_->dump()));
  std::vector<long long> out;
  for (std::size_t i = 0; i < value_->size(); ++i) {
    JsonNode item(&(*value_)[i], file_, fmt::format("{}[{}]", key_path_, i));
    out.push_back(item.as_int());
  }
  return out;
}

}  // namespace k3
